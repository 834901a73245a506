# Typed stubs of the ctypes binding (_lib.py): the signatures it declares are include/remat.h's.
import ctypes
from ctypes import Structure, c_void_p
from typing import Any, Callable, Dict, List, Optional, Tuple

SOMAJOR: int
REMAT_FRAMEWORK_TABLE: int

class RematError(Exception):
    status: int
    name: str
    message: str
    def __init__(self, status: int, name: str, message: str) -> None: ...

class RopeScaling(Structure):
    type: int
    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position: int

class Config(Structure):
    n_layer: int
    n_embd: int
    n_head: int
    vocab: int
    max_seq: int
    batch: int
    seq: int
    dropout: float
    attention: int
    lmhead_chunk: int
    dtype: int
    framework: int
    tp: int
    sp: int
    stage: int
    arch: int
    n_kv_head: int
    ffn_dim: int
    head_dim: int
    rope_theta: float
    rope_scaling: RopeScaling
    norm_eps: float
    tie_embeddings: int
    table: int
    cp: int

class PlanRow(Structure):
    policy: Optional[int]
    peak_bytes: int
    stored_bytes: int
    workset_bytes: int
    total_bytes: int
    overhead_pct: float
    step_ms_pred: float
    fits: int

class LayerInfo(Structure):
    kept: int
    recomputed: int
    kept_bytes: int
    offloaded: int
    host_bytes: int

class TableInfo(Structure):
    name: bytes
    blocks: int
    selective: int
    block_saved_bytes: int
    output_bytes: int
    outside_bytes: int
    reserve_bytes: int
    static_bytes: int
    context_bytes: int
    call_bytes: int

class PlanNode(Structure):
    kind: int
    first: int
    end: int
    parent: int
    depth: int
    keep: int
    keep_mask: int
    offload_mask: int
    last: int

class TableRow(Structure):
    row: PlanRow
    kept_bytes: int
    peak_bytes: int
    checkpoint_bytes: int
    checkpoint_calls: int
    device_peak_bytes: int

class GraphNode(Structure):
    bytes: int
    flops: float
    inputs: Any
    n_inputs: int
    group: int
    backward: int
    candidate: int

class GraphGroup(Structure):
    group: int
    saved: int
    rerun: int
    saved_bytes: int
    rerun_flops: float

GRAPH_KEEP: int
GRAPH_CANDIDATE: int
GRAPH_ALWAYS: int
GRAPH_METHODS: Tuple[str, ...]
GRAPH_SAVED: int
GRAPH_RERUN: int
NODE_KINDS: Tuple[str, ...]
KEEPS: Tuple[str, ...]
STRUCTS: Dict[str, Any]
_SIGNATURES: Dict[str, Tuple[List[Any], Any]]

def _check(lib: Any, path: str) -> Optional[str]: ...

def load() -> ctypes.CDLL: ...
def version() -> str: ...
def row_policy(row: PlanRow) -> Optional[str]: ...
