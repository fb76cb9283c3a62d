"""How long a training step spends talking: ring all-reduce over the gang's worst link.

    t_comm = 2(n-1)/n * S / B_eff + 2(n-1) * alpha,    alpha = RTT / 2

with B_eff the link throughput capped by loss through the Mathis et al. TCP model (per stream
MSS * sqrt(3/2) / (RTT * sqrt(p))) over NCCL's parallel streams. Shared by the placement score and the
simulator, so both judge a placement by the same physics. Works on floats and on numpy arrays alike.
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np
import numpy.typing as npt

MSS_BYTES = 1460
NCCL_STREAMS = 8
MATHIS_C = math.sqrt(1.5)

FloatArray = npt.NDArray[np.float64]
Num = float | FloatArray


def _effective(rtt_ms: Num, loss: Num, throughput_gbps: Num) -> FloatArray:
    rtt_s = np.maximum(np.asarray(rtt_ms, dtype=np.float64), 1e-6) / 1000.0
    p = np.asarray(loss, dtype=np.float64)
    with np.errstate(divide="ignore"):
        mathis = NCCL_STREAMS * MSS_BYTES * 8 * MATHIS_C / (rtt_s * np.sqrt(p)) / 1e9
    return np.asarray(np.where(p > 0, np.minimum(throughput_gbps, mathis), throughput_gbps), dtype=np.float64)


def _comm(workers: int, message_mb: float, rtt_ms: Num, loss: Num, throughput_gbps: Num) -> FloatArray:
    rtt = np.asarray(rtt_ms, dtype=np.float64)
    if workers <= 1:
        return np.zeros_like(rtt)
    bandwidth = np.maximum(_effective(rtt, loss, throughput_gbps), 1e-6)
    transfer = 2 * (workers - 1) / workers * message_mb * 8.0 / bandwidth  # Mbit / (Gbit/s) = ms
    return np.asarray(transfer + (workers - 1) * rtt, dtype=np.float64)  # latency: 2(n-1) * RTT/2


@overload
def effective_throughput_gbps(rtt_ms: float, loss: float, throughput_gbps: float) -> float: ...
@overload
def effective_throughput_gbps(rtt_ms: FloatArray, loss: FloatArray, throughput_gbps: FloatArray) -> FloatArray: ...
def effective_throughput_gbps(rtt_ms: Num, loss: Num, throughput_gbps: Num) -> Num:
    out = _effective(rtt_ms, loss, throughput_gbps)
    return float(out) if out.ndim == 0 else out


@overload
def comm_ms(workers: int, message_mb: float, rtt_ms: float, loss: float, throughput_gbps: float) -> float: ...
@overload
def comm_ms(workers: int, message_mb: float, rtt_ms: FloatArray, loss: FloatArray,
            throughput_gbps: FloatArray) -> FloatArray: ...
def comm_ms(workers: int, message_mb: float, rtt_ms: Num, loss: Num, throughput_gbps: Num) -> Num:
    """Milliseconds of communication per step; 0 for a single worker."""
    out = _comm(workers, message_mb, rtt_ms, loss, throughput_gbps)
    return float(out) if out.ndim == 0 else out
