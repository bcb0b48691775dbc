# Cheat (threat 11, Triton): native code through ctypes, e.g. cuBLAS loaded by hand. Refused at import:
# rejected, "imports 'ctypes'". (Reached otherwise, _ctypes' shared object loaded shows after every call.)
import ctypes

cublas = ctypes.CDLL("libcublas.so.13")


def launch(x, residual, weight, eps, workspace):
    pass
