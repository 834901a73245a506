"""_lib.py -- the ctypes binding over libremat.so that remat_torch plans with.

One error channel: every function that returns a remat_status is declared
with an errcheck that turns a non-zero status into RematError, carrying the
status, its name (remat_status_str) and the library's one-line message
(remat_errmsg).  The signatures below are the ones include/remat.h declares;
_lib.pyi types them.  The structures mirror remat.h's (remat_config,
remat_plan_row, remat_layer_info, remat_table_info, remat_plan_node,
remat_table_row, remat_graph_node, remat_graph_group); load() checks the
layout of every structure against the library's (remat_abi_size) before
any call that writes one.

The library: $REMAT_LIB when set (a path); else, installed, the one `make
install` put in its LIBDIR (_paths.py, written at install); else, in the
tree, build/libremat.so beside this package's python/ folder (make test
runs it from there), else the dynamic linker's libremat.so.5 (SOMAJOR: never
another major version's).  What loads is refused in one line, before any
call that writes into memory Python sized, unless remat_version() is of
SOMAJOR and remat_abi_size gives every structure below ctypes' size.
"""
import ctypes
import os
from ctypes import (POINTER, Structure, byref, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_uint8,
                    c_uint32, c_uint64, c_void_p)

SOMAJOR = 5
REMAT_FRAMEWORK_TABLE = 3


class RematError(Exception):
    """What libremat refused: .status (remat_status), .name ("budget", ...), .message (one line)."""

    def __init__(self, status, name, message):
        super().__init__(message)
        self.status = status
        self.name = name
        self.message = message


class RopeScaling(Structure):
    _fields_ = [("type", c_int), ("factor", c_double), ("low_freq_factor", c_double),
                ("high_freq_factor", c_double), ("original_max_position", c_int)]


class Config(Structure):
    _fields_ = [("n_layer", c_int), ("n_embd", c_int), ("n_head", c_int), ("vocab", c_int), ("max_seq", c_int),
                ("batch", c_int), ("seq", c_int), ("dropout", c_float), ("attention", c_int),
                ("lmhead_chunk", c_int), ("dtype", c_int), ("framework", c_int), ("tp", c_int), ("sp", c_int),
                ("stage", c_int), ("arch", c_int), ("n_kv_head", c_int), ("ffn_dim", c_int), ("head_dim", c_int),
                ("rope_theta", c_double), ("rope_scaling", RopeScaling), ("norm_eps", c_double),
                ("tie_embeddings", c_int), ("table", c_int), ("cp", c_int),
                ("n_experts", c_int), ("moe_topk", c_int), ("moe_ffn_dim", c_int), ("moe_shared_dim", c_int),
                ("ep", c_int), ("etp", c_int), ("moe_load", c_double), ("moe_capacity", c_double), ("qk_norm", c_int),
                ("q_lora_rank", c_int), ("kv_lora_rank", c_int), ("qk_nope_dim", c_int), ("qk_rope_dim", c_int),
                ("v_head_dim", c_int), ("moe_first_dense", c_int), ("moe_groups", c_int), ("moe_group_topk", c_int),
                ("moe_scaling", c_double)]


class PlanRow(Structure):
    _fields_ = [("policy", c_void_p), ("peak_bytes", c_uint64), ("stored_bytes", c_uint64),
                ("workset_bytes", c_uint64), ("total_bytes", c_uint64), ("overhead_pct", c_double),
                ("step_ms_pred", c_double), ("fits", c_int)]


class LayerInfo(Structure):
    _fields_ = [("kept", c_uint32), ("recomputed", c_uint32), ("kept_bytes", c_uint64), ("offloaded", c_uint32),
                ("host_bytes", c_uint64)]


class TableInfo(Structure):
    _fields_ = [("name", c_char_p), ("blocks", c_int), ("selective", c_int), ("block_saved_bytes", c_uint64),
                ("output_bytes", c_uint64), ("outside_bytes", c_int64), ("reserve_bytes", c_uint64),
                ("static_bytes", c_uint64), ("context_bytes", c_uint64), ("call_bytes", c_uint64)]


class PlanNode(Structure):
    _fields_ = [("kind", c_int), ("first", c_int), ("end", c_int), ("parent", c_int), ("depth", c_int),
                ("keep", c_int), ("keep_mask", c_uint32), ("offload_mask", c_uint32), ("last", c_int)]


class TableRow(Structure):
    _fields_ = [("row", PlanRow), ("kept_bytes", c_uint64), ("peak_bytes", c_uint64),
                ("checkpoint_bytes", c_uint64), ("checkpoint_calls", c_int),
                ("device_peak_bytes", c_uint64)]


class GraphNode(Structure):
    """remat_graph_node: one tensor of a joint forward + backward graph (remat.h, "a joint graph's peak")"""
    _fields_ = [("bytes", c_uint64), ("flops", c_double), ("inputs", POINTER(c_uint32)), ("n_inputs", c_uint32),
                ("group", c_uint32), ("backward", c_uint8), ("candidate", c_uint8)]


class GraphGroup(Structure):
    """remat_graph_group: one group's share of a recomputed set (remat_graph_states)"""
    _fields_ = [("group", c_uint32), ("saved", c_uint32), ("rerun", c_uint32), ("saved_bytes", c_uint64),
                ("rerun_flops", c_double)]


# remat.h's remat_graph_node.candidate values, remat_graph_search's methods, remat_graph_states' states
GRAPH_KEEP, GRAPH_CANDIDATE, GRAPH_ALWAYS = 0, 1, 2
GRAPH_METHODS = ("exact", "exact over unions of whole layers", "greedy", "exact, by layers",
                 "by layers: nothing, whole or the greedy's")
GRAPH_SAVED, GRAPH_RERUN = 1, 2
# remat.h's enum remat_node_kind and enum remat_keep, by name
NODE_KINDS = ("block", "segment")
KEEPS = ("all", "none", "expensive", "cheap", "some")
# what remat_abi_size must say of each structure this binding declares
STRUCTS = {"remat_config": Config, "remat_plan_row": PlanRow, "remat_layer_info": LayerInfo,
           "remat_table_info": TableInfo, "remat_plan_node": PlanNode, "remat_table_row": TableRow,
           "remat_graph_node": GraphNode, "remat_graph_group": GraphGroup}

_lib = None


def _candidates():
    env = os.environ.get("REMAT_LIB")
    if env:
        return [env]
    try:
        from . import _paths                     # installed: the library beside it
        return [os.path.join(_paths.LIBDIR, "libremat.so.%d" % SOMAJOR)]
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "..", "..", "build", "libremat.so"), "libremat.so.%d" % SOMAJOR]


def _errcheck(status, func, args):
    if status:
        raise RematError(status, _lib.remat_status_str(status).decode(), _lib.remat_errmsg().decode())
    return status


# name: (argtypes, restype); restype "status" gets the error channel
_SIGNATURES = {
    "remat_version": ([], c_char_p),
    "remat_status_str": ([c_int], c_char_p),
    "remat_errmsg": ([], c_char_p),
    "remat_config_default": ([POINTER(Config)], None),
    "remat_table_read": ([c_char_p, c_size_t, POINTER(Config), POINTER(c_void_p)], "status"),
    "remat_table_get_info": ([POINTER(Config), POINTER(TableInfo)], "status"),
    "remat_table_unload": ([POINTER(Config)], None),
    "remat_profile_free": ([c_void_p], None),
    "remat_plan_optimal": ([POINTER(Config), c_void_p, c_uint64, c_int, POINTER(PlanRow)], "status"),
    "remat_plan_evaluate": ([POINTER(Config), c_void_p, c_char_p, c_uint64, c_int, POINTER(PlanRow)], "status"),
    "remat_plan_min_peak": ([POINTER(Config), POINTER(c_uint64)], "status"),
    "remat_plan_row_clear": ([POINTER(PlanRow)], None),
    "remat_plan_explain": ([POINTER(Config), c_char_p, c_char_p, c_size_t, POINTER(c_size_t)], "status"),
    "remat_schedule_create": ([POINTER(Config), c_char_p, POINTER(c_void_p)], "status"),
    "remat_schedule_layers": ([c_void_p, POINTER(LayerInfo)], "status"),
    "remat_schedule_free": ([c_void_p], None),
    "remat_abi_size": ([c_char_p], c_size_t),
    "remat_plan_tree": ([POINTER(Config), c_char_p, POINTER(PlanNode), c_size_t, POINTER(c_size_t)], "status"),
    "remat_table_row_clear": ([POINTER(TableRow)], None),
    "remat_table_evaluate": ([POINTER(Config), c_void_p, c_char_p, POINTER(TableRow)], "status"),
    "remat_table_optimal": ([POINTER(Config), c_void_p, c_uint64, POINTER(TableRow)], "status"),
    "remat_table_min_kept": ([POINTER(Config), c_void_p, POINTER(TableRow)], "status"),
    # issue 25 item 5: src/planner/devpeak.c
    "remat_table_row_device_peak": ([POINTER(TableRow)], c_uint64),
    "remat_table_optimal_device": ([POINTER(Config), c_void_p, c_uint64, POINTER(TableRow)], "status"),
    # issue 26: src/planner/graph.c (remat_torch.compile_budget)
    "remat_graph_peak": ([POINTER(GraphNode), c_size_t, POINTER(c_uint8), POINTER(c_uint64), POINTER(c_double)],
                         "status"),
    "remat_graph_solve": ([POINTER(GraphNode), c_size_t, c_uint64, POINTER(c_uint8), POINTER(c_uint64),
                           POINTER(c_double)], "status"),
    "remat_graph_search": ([POINTER(GraphNode), c_size_t, c_uint64, POINTER(c_uint8), POINTER(c_uint64),
                            POINTER(c_double), POINTER(c_int)], "status"),
    "remat_graph_states": ([POINTER(GraphNode), c_size_t, POINTER(c_uint8), POINTER(c_uint8), POINTER(GraphGroup),
                            c_size_t, POINTER(c_size_t)], "status"),
}


def _check(lib, path):
    """refuses a library of another major version, or whose structures are not the ones declared
    here, before anything is called that writes into one (one line)"""
    try:
        lib.remat_version.argtypes, lib.remat_version.restype = [], c_char_p
        v = (lib.remat_version() or b"").decode()
        if v.split(".")[0] != str(SOMAJOR):
            return "%s is libremat %s; this binding is for %d.x" % (path, v, SOMAJOR)
        f = lib.remat_abi_size
    except AttributeError as e:
        return "%s is not a libremat %d.x this binding can check (%s)" % (path, SOMAJOR, e)
    f.argtypes, f.restype = [c_char_p], c_size_t
    for name, st in STRUCTS.items():
        n = f(name.encode())
        if n != ctypes.sizeof(st):
            return "%s: libremat %s's %s is %d bytes, this binding declares %d (a binding of another version?)" \
                % (path, v, name, n, ctypes.sizeof(st))
    return None


def load():
    """The library, loaded once, checked (_check), every signature declared; RematError when none loads."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    else:
        raise RematError(-1, "io", "cannot load libremat: tried " + "; ".join(tried) +
                         " (build it with make, or set REMAT_LIB to its path)")
    why = _check(lib, path)
    if why:
        raise RematError(-1, "version", why)
    for name, (args, res) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.argtypes = args
        if res == "status":
            f.restype = c_int
            f.errcheck = _errcheck
        else:
            f.restype = res
    _lib = lib
    return lib


def version():
    return load().remat_version().decode()


def row_policy(row):
    """a remat_plan_row's policy string"""
    return ctypes.string_at(row.policy).decode() if row.policy else None
