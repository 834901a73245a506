# Typed stubs of remat_torch's public API (see __init__.py and README, "Using remat from PyTorch").
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

__version__: str

class RematError(Exception):
    status: int
    name: str
    message: str

Size = Union[int, str]

class Node:
    kind: str
    first: int
    end: int
    keep: str
    keep_mask: int
    offload: int
    last: bool
    depth: int
    children: List["Node"]

Tree = List[Node]

class RematCheckpoint(torch.nn.Module):
    remat: str

Blocks = Union[None, str, Sequence[torch.nn.Module], Sequence[Union[str, Sequence[torch.nn.Module]]]]

class Table:
    data: Dict[str, Any]
    blocks: Optional[List[Optional[torch.nn.Module]]]
    chain: Union[None, str, List[str]]
    chains: Optional[List[Tuple[str, List[torch.nn.Module]]]]
    junctions: List[int]
    kept_bytes: Optional[int]
    input_key: Optional[str]
    changing_buffers: Optional[List[set]]
    sac: Any
    last_output_saved_by_head: bool
    def __init__(self, data: Dict[str, Any], blocks: Optional[List[torch.nn.Module]] = ..., chain: Optional[str] = ...,
                 kept_bytes: Optional[int] = ...) -> None: ...
    def json(self) -> str: ...
    def save(self, path: str) -> None: ...
    @classmethod
    def load(cls, path: str) -> "Table": ...

class Plan:
    policy: str
    kept_bytes: int
    peak_bytes: int
    device_peak_bytes: int
    overhead: float
    step_ms: float
    checkpointed: List[int]
    segments: List[Tuple[int, int]]
    tree: Tree
    checkpoint_calls: int
    budget: int
    table: Table
    def explain(self) -> str: ...
    def evaluate(self, policy: str) -> Dict[str, float]: ...

def measure(model: torch.nn.Module, sample_inputs: Any, loss_fn: Optional[Callable[[Any], torch.Tensor]] = ...,
            blocks: Blocks = ..., optimizer: Optional[torch.optim.Optimizer] = ...,
            path: Optional[str] = ..., reps: int = ..., selective: bool = ...) -> Table: ...
def plan(model: torch.nn.Module, sample_inputs: Any, budget: Optional[Size] = ...,
         loss_fn: Optional[Callable[[Any], torch.Tensor]] = ..., blocks: Blocks = ...,
         optimizer: Optional[torch.optim.Optimizer] = ..., table: Optional[Table] = ..., policy: Optional[str] = ...,
         kept_budget: Optional[Size] = ..., **measure_kw: Any) -> Plan: ...
def apply(model: torch.nn.Module, plan: Plan) -> torch.nn.Module: ...
def unapply(model: torch.nn.Module) -> torch.nn.Module: ...
def kept_bytes(model: torch.nn.Module, sample_inputs: Any, loss_fn: Optional[Callable[[Any], torch.Tensor]] = ...,
               method: str = ...) -> int: ...
def find_blocks(model: torch.nn.Module, blocks: Union[None, str, Sequence[torch.nn.Module]] = ...
                ) -> Tuple[List[torch.nn.Module], str]: ...
def find_chains(model: torch.nn.Module, blocks: Blocks = ...) -> List[Tuple[str, List[torch.nn.Module]]]: ...
def min_kept(table: Table) -> Tuple[int, str]: ...
def parse_size(s: Size) -> int: ...
def library_version() -> str: ...
def step_peak(model: torch.nn.Module, sample_inputs: Any, optimizer: Optional[torch.optim.Optimizer],
              loss_fn: Optional[Callable[[Any], torch.Tensor]] = ...) -> Tuple[int, int]: ...

class CompiledLayer:
    name: str
    saved: List[str]
    recomputed: List[str]
    saved_bytes: int
    recompute_flops: float

class CompiledPlan:
    budget: int
    peak_bytes: int
    recompute_flops: float
    method: str
    layers: List[CompiledLayer]
    saved: List[str]
    recomputed: List[str]
    tensor_of: Dict[str, str]
    graph_nodes: int
    candidates: int
    searched: int
    def explain(self) -> str: ...

class compile_budget:
    budget: int
    plans: List[CompiledPlan]
    refused: Optional[Exception]
    def __init__(self, budget: Size) -> None: ...
    def __enter__(self) -> "compile_budget": ...
    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool: ...

class _HF:
    def chains(self, model: torch.nn.Module) -> List[Tuple[str, List[torch.nn.Module]]]: ...
    def as_call(self, model: torch.nn.Module, batch: Dict[str, Any]) -> Tuple[torch.nn.Module, Tuple[Any, ...]]: ...
    def measure(self, model: torch.nn.Module, batch: Dict[str, Any], optimizer: Optional[torch.optim.Optimizer] = ...,
                chain: Union[None, str, Sequence[str]] = ..., **kw: Any) -> Table: ...
    def plan(self, model: torch.nn.Module, batch: Dict[str, Any], budget: Optional[Size] = ...,
             kept_budget: Optional[Size] = ..., optimizer: Optional[torch.optim.Optimizer] = ...,
             chain: Optional[str] = ..., table: Optional[Table] = ..., policy: Optional[str] = ..., **kw: Any) -> Plan: ...
    def enable(self, model: torch.nn.Module, batch: Dict[str, Any], budget: Optional[Size] = ...,
               kept_budget: Optional[Size] = ..., optimizer: Optional[torch.optim.Optimizer] = ...,
               chain: Optional[str] = ..., **kw: Any) -> Plan: ...
    def apply(self, model: torch.nn.Module, plan: Plan) -> torch.nn.Module: ...
    def unapply(self, model: torch.nn.Module) -> torch.nn.Module: ...
    def applied(self, model: torch.nn.Module) -> Optional[Plan]: ...

hf: _HF
