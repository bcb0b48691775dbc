# Cheat (threat 11, Triton): norm/fused_add_rmsnorm done by torch's operators, the way a hurried Triton
# author reaches for them. The import is refused by d2k's import guard (warm-up and worker): rejected,
# "imports 'torch'". Without the guard torch is not even in the worker's sandbox (only triton/ is).
import torch


def launch(x, residual, weight, eps, workspace):
    raise RuntimeError("unreachable: the import above is refused")
