"""A small CNN trained with DistributedDataParallel on scikit-learn's digits.

The same script runs three ways, chosen only by its environment:

* one process per Trainyard task (framework: pytorch): the launcher sets
  MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK for every task;
* under torchrun inside one task: torchrun reads PET_* and sets the same
  variables for each process it starts;
* standalone (WORLD_SIZE unset): a single process, no process group.

The data set is `sklearn.datasets.load_digits` (1797 8x8 images bundled with
scikit-learn, nothing to download). Seeds, the train/test split and the
per-epoch data order are fixed, so every run with the same world size trains
the same model, bit for bit, and every rank ends with the same parameters.

Rank 0 checkpoints after each epoch to $YARD_CHECKPOINT_DIR/checkpoint.pt; a
restarted job resumes from it.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

CHECKPOINT_NAME = "checkpoint.pt"
FAIL_EXIT_STATUS = 3


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=10, help="epochs to train in total")
    ap.add_argument("--lr", type=float, default=0.1, help="peak SGD learning rate (cosine decay over the epochs)")
    ap.add_argument("--batch-size", type=int, default=32, help="batch size of each process")
    ap.add_argument("--seed", type=int, default=0, help="seed of the model and the data order")
    ap.add_argument("--log-every", type=int, default=5, help="report the loss every N steps")
    ap.add_argument("--epoch-sleep", type=float, default=0.0, metavar="SECONDS",
                    help="sleep after each epoch (gives a test time to kill a worker)")
    ap.add_argument("--fail-rank", type=int, default=-1, metavar="R",
                    help="this rank exits with status 3 at --fail-epoch (first attempt only)")
    ap.add_argument("--fail-epoch", type=int, default=-1, metavar="E",
                    help="the epoch at whose start --fail-rank fails")
    ap.add_argument("--checkpoint-dir", default=os.environ.get("YARD_CHECKPOINT_DIR"),
                    help="where to checkpoint (default: $YARD_CHECKPOINT_DIR; none: no checkpoints)")
    ap.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                    help="how long a collective may wait for the other ranks")
    ap.add_argument("--peer-loss-wait", type=float, default=60.0, metavar="SECONDS",
                    help="under Trainyard, how long a rank that lost a peer waits to be "
                         "stopped with the gang before it exits 1 itself")
    args = ap.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.log_every < 1:
        ap.error("--epochs, --batch-size and --log-every must be >= 1")
    return args


class Net(nn.Module):
    """Two 3x3 convolutions, one 2x2 max-pool, two linear layers: ~43k parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 8x8 -> 4x4
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def load_data():
    """The digits, scaled to [0, 1], split 80/20 (stratified, fixed seed)."""
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    idx_train, idx_test = train_test_split(
        list(range(len(y))), test_size=0.2, stratify=digits.target, random_state=42)
    return (TensorDataset(x[idx_train], y[idx_train]),
            TensorDataset(x[idx_test], y[idx_test]))


def lr_at(args, epoch):
    """Cosine decay from --lr over the run: a function of the epoch alone, so a
    resumed run uses the same rates as one that was never interrupted."""
    return args.lr * 0.5 * (1.0 + math.cos(math.pi * (epoch - 1) / args.epochs))


def say(line):
    """One whole line in one write: under torchrun the local ranks share the
    task's stdout, and print() writes the text and the newline separately,
    so two ranks' lines could interleave mid-line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def yard_metric(**values):
    """A metric line for Trainyard: every number becomes a point, step the x-axis."""
    say("@yard " + json.dumps(values))


def log(rank, msg):
    say(f"[rank {rank}] {msg}")


def evaluate(model, test_set):
    """Accuracy on the whole test set (small enough for every rank to do it)."""
    model.eval()
    with torch.no_grad():
        x, y = test_set.tensors
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def params_sha256(model):
    """sha256 of every parameter's bytes, in the model's (fixed) registration order."""
    h = hashlib.sha256()
    for _, p in model.named_parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(directory, epoch, model, optimizer):
    """Writes the checkpoint atomically: a reader sees the old file or the new one."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CHECKPOINT_NAME)
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"epoch": epoch, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(directory, rank, distributed):
    """The checkpoint to resume from, or None.

    Rank 0's copy decides and is sent to every rank, so all ranks start from
    the same state even when the checkpoint directory is local to each node.
    """
    ckpt = None
    if rank == 0 and directory and os.path.isdir(directory):
        for name in os.listdir(directory):  # left by a rank 0 stopped while it saved
            if name.startswith(CHECKPOINT_NAME + ".tmp."):
                os.unlink(os.path.join(directory, name))
        path = os.path.join(directory, CHECKPOINT_NAME)
        if os.path.exists(path):
            ckpt = torch.load(path, map_location="cpu")
    if distributed:
        box = [ckpt]
        dist.broadcast_object_list(box, src=0)
        ckpt = box[0]
    return ckpt


def lost_peer(err):
    """Whether err is gloo telling that another rank went away."""
    text = str(err)
    return "gloo/transport" in text or "Connection closed by peer" in text \
        or "Connection reset by peer" in text


def main():
    args = parse_args()
    torch.set_num_threads(1)

    # Who we are: from the launcher (one process per task) or torchrun; neither: standalone.
    distributed = "WORLD_SIZE" in os.environ
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    restart_count = int(os.environ.get("YARD_RESTART_COUNT") or "0")
    try:
        train(args, distributed, world_size, rank, local_rank, restart_count)
    except RuntimeError as e:
        if not (distributed and lost_peer(e)):
            raise
        # Another rank has gone (it failed, or was killed). The platform has
        # seen that first: under Trainyard, wait to be stopped with the gang
        # rather than fail too, so that the job's failure names the rank
        # that caused it, not this one.
        log(rank, f"lost contact with another rank: {e}")
        if os.environ.get("YARD_JOB_ID") and args.peer_loss_wait > 0:
            log(rank, f"waiting up to {args.peer_loss_wait:g}s to be stopped with the gang")
            time.sleep(args.peer_loss_wait)
        sys.exit(1)


def train(args, distributed, world_size, rank, local_rank, restart_count):
    if distributed:
        # env:// reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK
        dist.init_process_group("gloo", init_method="env://",
                                timeout=datetime.timedelta(seconds=args.timeout))
    log(rank, f"world size {world_size}, local rank {local_rank}, host {socket.gethostname()}, "
              f"restart {restart_count}, torch {torch.__version__}")

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    train_set, test_set = load_data()
    # Each rank sees its own 1/world_size of the training set; set_epoch
    # reshuffles it each epoch from (seed, epoch) alone, so the order is the
    # same whether or not the job was restarted in between.
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start_epoch = 1
    ckpt = load_checkpoint(args.checkpoint_dir, rank, distributed)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_epoch = ckpt["epoch"] + 1
        say(f"resumed from epoch {ckpt['epoch']}")
    # DDP averages the gradients over all ranks during backward().
    ddp = DistributedDataParallel(model) if distributed else model

    # Only one process per task reports metrics (torchrun runs several in one task).
    report = local_rank == 0
    steps_per_epoch = len(loader)
    step = (start_epoch - 1) * steps_per_epoch
    window = torch.zeros(2, dtype=torch.float64)  # loss sum, batches since the last report
    t0 = time.monotonic()
    for epoch in range(start_epoch, args.epochs + 1):
        if rank == args.fail_rank and epoch == args.fail_epoch and restart_count == 0:
            log(rank, f"failing on purpose at the start of epoch {epoch} "
                      f"(--fail-rank {args.fail_rank} --fail-epoch {args.fail_epoch}), "
                      f"exit status {FAIL_EXIT_STATUS}")
            sys.exit(FAIL_EXIT_STATUS)
        sampler.set_epoch(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(args, epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            window += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            if step % args.log_every == 0:
                if distributed:  # the loss of all ranks, so every task reports the same curve
                    dist.all_reduce(window)
                if report:
                    yard_metric(step=step, epoch=epoch, loss=round((window[0] / window[1]).item(), 5))
                window.zero_()

        acc = evaluate(model, test_set)
        if rank == 0 and args.checkpoint_dir:
            save_checkpoint(args.checkpoint_dir, epoch, model, optimizer)
        # rank 0 reports an epoch once its checkpoint is in place
        if report:
            yard_metric(step=step, epoch=epoch, test_acc=round(acc, 4))
        if rank == 0:
            log(rank, f"epoch {epoch}/{args.epochs}: test accuracy {acc:.4f}, "
                      f"{time.monotonic() - t0:.1f}s")
        if distributed:
            # Nobody moves on before the checkpoint of this epoch is in place:
            # a rank that fails from here on is resumed from this epoch.
            dist.barrier()
        if args.epoch_sleep > 0:
            time.sleep(args.epoch_sleep)

    acc = evaluate(model, test_set)
    say(f"final test accuracy: {acc:.4f}")
    say(f"params sha256: {params_sha256(model)}")
    log(rank, f"trained in {time.monotonic() - t0:.1f}s")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
