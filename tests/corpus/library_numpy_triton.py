# Cheat (threat 11, Triton): a library imported beside Triton, here numpy (refused like torch, cupy, jax,
# cuda-python...): rejected, "imports 'numpy'".
import numpy as np
import triton


def launch(x, residual, weight, eps, workspace):
    np.zeros(1)
