"""Prints what a task sees inside its container, and fails (exit 1) if the
image cannot run the PyTorch examples or the task is not where Trainyard
puts it: in its code dir, with a writable checkpoint dir."""
import glob
import os
import platform
import socket
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_limits():
    """The memory, CPU and pids limits of the container (cgroup v2 or v1)."""
    v2 = {"memory": read("/sys/fs/cgroup/memory.max"), "cpu": read("/sys/fs/cgroup/cpu.max"),
          "pids": read("/sys/fs/cgroup/pids.max")}
    if any(v2.values()):
        return v2
    quota, period = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    return {"memory": read("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
            "cpu": f"{quota} {period}" if quota else None, "pids": read("/sys/fs/cgroup/pids/pids.max")}


def main():
    problems = []
    task = f"{os.environ.get('YARD_ROLE')}/{os.environ.get('YARD_TASK_INDEX')}"
    image = next((line.split("=", 1)[1].strip('"') for line in (read("/etc/os-release") or "").splitlines()
                  if line.startswith("PRETTY_NAME=")), "?")
    print(f"{task} of job {os.environ.get('YARD_JOB_ID')} in a container of {image}, "
          f"python {platform.python_version()} at {sys.executable}")
    try:
        import sklearn
        import torch
        print(f"torch {torch.__version__} (CUDA available: {torch.cuda.is_available()}), "
              f"scikit-learn {sklearn.__version__}")
    except ImportError as e:
        problems.append(f"the image lacks what the examples need: {e}")
    cwd = os.getcwd()
    print(f"working dir {cwd}: {sorted(os.listdir(cwd))}")
    if not os.path.exists(os.path.join(cwd, "check_image.py")):
        problems.append(f"the working dir {cwd} is not the job's code dir")
    ckpt = os.environ.get("YARD_CHECKPOINT_DIR")
    if ckpt:
        try:
            with open(os.path.join(ckpt, f".probe-{task.replace('/', '-')}"), "w") as f:
                f.write("ok")
            print(f"checkpoint dir {ckpt}: writable")
        except OSError as e:
            problems.append(f"checkpoint dir {ckpt}: {e}")
    data = os.environ.get("YARD_DATA_DIR")
    if data:
        print(f"data dir {data}: {'read-only' if not os.access(data, os.W_OK) else 'WRITABLE'}")
    print(f"GPUs: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r} "
          f"NVIDIA_VISIBLE_DEVICES={os.environ.get('NVIDIA_VISIBLE_DEVICES')!r} "
          f"devices {sorted(glob.glob('/dev/nvidia*'))}")
    print(f"limits: {cgroup_limits()}")
    print(f"hostname {socket.gethostname()}, interfaces {sorted(n for _, n in socket.if_nameindex())}")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
