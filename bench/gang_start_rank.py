"""One rank of the gang-start benchmark (bench/gang_start.py), the same script
under yard and under torchrun: joins the gloo process group from env://
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK) and prints, on one line, the
wall-clock times at which it started, had imported torch, and had completed
init_process_group, which returns only once every rank has joined:

  gang_start rank=R world=W host=H t_exec=T t_import=T t_init=T

GANG_START_TIMEOUT (seconds, default 60) bounds the rendezvous, so a rank
whose peers never come fails instead of hanging.
"""
import time

t_exec = time.time()

import datetime  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402

import torch.distributed as dist  # noqa: E402

t_import = time.time()
dist.init_process_group(
    "gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("GANG_START_TIMEOUT", "60"))))
t_init = time.time()
print(f"gang_start rank={dist.get_rank()} world={dist.get_world_size()} host={socket.gethostname()} "
      f"t_exec={t_exec:.6f} t_import={t_import:.6f} t_init={t_init:.6f}", flush=True)
dist.destroy_process_group()
