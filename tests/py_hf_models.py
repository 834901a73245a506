#!/usr/bin/python3
"""py_hf_models.py -- remat_torch.hf on Hugging Face transformers models as they are.

Each model is a transformers class built from a small config with random
weights (nothing from a hub): LlamaForCausalLM, Qwen3ForCausalLM,
MistralForCausalLM, Gemma3ForCausalLM (sliding and global layers),
GPT2LMHeadModel (dropout 0.1), BertForMaskedLM, ViTForImageClassification,
T5ForConditionalGeneration (an encoder chain and a decoder chain in one
step, the decoder's cross-attention reading the encoder's output; dropout
0.1).  Its chains are found generically (the model's lists of
GradientCheckpointingLayer's), measured with an AdamW optimizer (a table of
version 3: the working sets, the contexts), and at kept budgets of 25%, 50%
and 75% of what the unwrapped model keeps it is planned, applied through the
layers' GradientCheckpointingLayer seam, and checked:
  - kept bytes: the plan's prediction against the allocator's net bytes over
    the forward (torch.profiler) and against saved_tensors_hooks plus what
    torch.utils.checkpoint holds, within 1% and 128 + 16 bytes per checkpoint;
  - the step's peak: the plan's device_peak_bytes (C: the static bytes and a
    walk of the plan's schedule with the measured working sets) against the
    allocator's over a whole steady step, forward, backward and AdamW
    (remat_torch.step_peak): within 1% either way (PEAK_UNDER, PEAK_OVER);
  - the loss and every gradient bit for bit those of the unwrapped model
    (torch.equal; SDPA's CPU kernels and the rest are deterministic at a
    fixed thread count, and the RNG state is preserved for dropout).
T5 also under the planner's first two plans that nest checkpoints inside a
segment (frames within frames), and its table's chains, junction and
contexts (the position biases its stacks' first layers make).
Also: budget= as device memory (the plan's predicted peak within it, the
measured one too), eval() and no_grad after apply, and HF's own gradient
checkpointing against a plan in both orders (taken over; refused in one
line).  Gemma 3's global layer saves other tensors than its sliding ones:
each block has its own entries, and a segment across the two kinds runs each
layer with its own mask.  The table of the issue's closing note is printed.

transformers 5.x needs torch >= 2.5: under Debian's torch 1.13 it skips,
saying so; run_tests.sh runs it under the virtual environment's torch 2.x.
"""
# REMAT_TEST_TORCH: 2
# REMAT_TEST_REQUIRED: CI's virtual environment has torch 2.x and transformers 5.x; remat_torch.hf must be checked there
# REMAT_TEST_IN_PROCESS: it loads libremat.so into the interpreter (tests/python_in_process.sh)
import copy
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Checks, import_remat_torch, report, skip

NAME = "py_hf_models"
try:
    import torch
except ImportError:
    skip(NAME, "torch is not installed for this interpreter")
if int(torch.__version__.split(".")[0]) < 2:
    skip(NAME, "transformers 5.x needs torch >= 2.5 (it disables its models under torch %s); run it with the "
         "virtual environment's python" % torch.__version__)
try:
    import transformers
    from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: F401
except ImportError as e:
    skip(NAME, "transformers 5.x is not installed for this interpreter (%s)" % e)

rt = import_remat_torch()

transformers.logging.set_verbosity_error()
V, T, B = 128, 32, 2
TEXT = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, use_cache=False)


def models():
    """(name, model, batch): tiny configs, random weights"""
    tf = transformers
    torch.manual_seed(0)
    ids = torch.randint(0, V, (B, T))
    lm = {"input_ids": ids, "labels": ids}
    yield "Llama", tf.LlamaForCausalLM(tf.LlamaConfig(**TEXT)), lm
    yield "Qwen3", tf.Qwen3ForCausalLM(tf.Qwen3Config(head_dim=16, **TEXT)), lm
    yield "Mistral", tf.MistralForCausalLM(tf.MistralConfig(sliding_window=16, **TEXT)), lm
    g = tf.Gemma3TextConfig(head_dim=16, sliding_window=16, query_pre_attn_scalar=16,
                            layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                         "sliding_attention"], **TEXT)
    yield "Gemma3", tf.Gemma3ForCausalLM(g), lm
    yield "GPT2", tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=V, n_embd=64, n_layer=4, n_head=4, n_positions=64,
                                                   use_cache=False)), lm
    mlm = dict(lm, labels=torch.where(torch.rand(B, T) < 0.3, ids, torch.full_like(ids, -100)))
    yield "Bert", tf.BertForMaskedLM(tf.BertConfig(vocab_size=V, hidden_size=64, num_hidden_layers=4,
                                                   num_attention_heads=4, intermediate_size=128,
                                                   max_position_embeddings=64)), mlm
    vit = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                       intermediate_size=128, num_labels=10)
    yield "ViT", tf.ViTForImageClassification(vit), {"pixel_values": torch.randn(B, 3, 32, 32),
                                                    "labels": torch.randint(0, 10, (B,))}
    # an encoder chain and a decoder chain (encoder.block, decoder.block) in one step, whose
    # cross-attention reads the encoder's output; dropout 0.1 (its default)
    t5 = tf.T5Config(vocab_size=V, d_model=64, d_kv=16, d_ff=128, num_layers=4, num_decoder_layers=4, num_heads=4,
                     use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    yield "T5", tf.T5ForConditionalGeneration(t5), lm




def step(model, batch, seed=5):
    """loss and every gradient of one step from no gradients, the RNG seeded"""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = model(**batch).loss
    loss.backward()
    out = loss.detach().clone(), [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return out


def same(a, b):
    return torch.equal(a[0], b[0]) and len(a[1]) == len(b[1]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))


def peak(model, batch, opt):
    """the measured peak of one steady step (step_peak), the model and the optimizer left as they were"""
    state = copy.deepcopy(model.state_dict())
    ostate = copy.deepcopy(opt.state_dict())
    call, values = rt.hf.as_call(model, batch)
    torch.manual_seed(5)
    try:
        return rt.step_peak(call, values, opt)[0]
    finally:
        model.load_state_dict(state)
        opt.load_state_dict(ostate)
        model.zero_grad(set_to_none=True)


def within(pred, got, calls):
    """kept bytes: within 1% and a few bytes per checkpoint, and 128 more: what the forward allocates
    and holds that autograd does not save (the loss it returns, 4 bytes, which the profiler counts;
    GPT-2 holds 100 bytes so, under every plan)"""
    return abs(pred - got) <= 0.01 * got and abs(pred - got) <= 128 + 16 * calls


# A peak: within 1% of the prediction either way (C walks the plan's schedule with the working sets
# the table measured: each block's backward, the head's, the input's, the optimizer step's).
# docs/pytorch.md gives the figures.
PEAK_UNDER, PEAK_OVER = 0.01, 0.01


def near(pred, got):
    return got <= pred * (1 + PEAK_UNDER) and pred <= got * (1 + PEAK_OVER)


def check_model(check, name, model, batch):
    model.train()
    base = step(model, batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # one step, so that AdamW's state exists (a steady step's peak counts it), then back to the weights
    state = copy.deepcopy(model.state_dict())
    torch.manual_seed(5)
    model(**batch).loss.backward()
    opt.step()
    model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    check(same(base, step(model, batch)), "%s: the warm-up changed the model" % name)
    table = rt.hf.measure(model, batch, optimizer=opt)
    check(same(base, step(model, batch)), "%s: measure() changed the model" % name)
    # a table of version 3 (the working sets): Gemma 3's global layer (2) saves other tensors than its
    # sliding ones, T5's first layers (the relative position bias) and its decoder's (cross-attention)
    # than the others, each block its own entries; the other models' blocks are alike
    d = table.data
    chains = d.get("chains", [d])
    blocks = [b for c in chains for b in c["blocks"]]
    alike = all((b["saved"], b["output_bytes"]) == (blocks[0]["saved"], blocks[0]["output_bytes"]) for b in blocks)
    check(d["version"] == 3 and alike == (name not in ("Gemma3", "T5")) and
          all("work_bytes" in b for b in blocks) and "work_bytes" in chains[-1]["head"],
          "%s: a table of version %d, its blocks %s" % (name, d["version"], "alike" if alike else "differ"))
    if name == "T5":
        check([(c["name"], c["reads"], len(c["blocks"])) for c in chains] ==
              [("encoder.block", [], 4), ("decoder.block", ["encoder.block"], 4)] and
              chains[0]["head"].get("output_bytes") == B * T * 64 * 4 and table.junctions == [4] and
              [b is None for b in table.blocks] == [False] * 4 + [True] + [False] * 4,
              "T5's chains: %s, junctions %s" % ([(c["name"], c["reads"], len(c["blocks"])) for c in chains],
                                                  table.junctions))
        # the position bias the first layer of each stack makes, and the zeros the decoder's first
        # cross-attention makes, are what the later layers' checkpoints hold
        check(sorted((x["made_by"], x["blocks"]) for x in d["contexts"]) ==
              [(0, [1, 2, 3]), (5, [6, 7, 8]), (5, [6, 7, 8])], "T5's contexts: %s" % d["contexts"])
    call, values = rt.hf.as_call(model, batch)
    kept = table.kept_bytes
    none = rt.hf.plan(model, batch, kept_budget=kept, table=table, policy="none")
    prof = rt.kept_bytes(call, values, method="profiler")
    check(within(none.kept_bytes, prof, 0), "%s: 'none' predicts %d kept bytes, the profiler %d"
          % (name, none.kept_bytes, prof))
    pk = peak(model, batch, opt)
    check.rows.append((name, "none", none.kept_bytes, prof, none.device_peak_bytes, pk, True, "none"))
    check(near(none.device_peak_bytes, pk), "%s none: peak predicted %d, measured %d"
          % (name, none.device_peak_bytes, pk))
    for frac in (0.25, 0.5, 0.75):
        budget = int(frac * kept)
        p = rt.hf.plan(model, batch, kept_budget=budget, table=table)
        check(p.kept_bytes <= budget and p.checkpointed, "%s at %d%%: %s keeps %d > %d or checkpoints nothing"
              % (name, 100 * frac, p.policy, p.kept_bytes, budget))
        rt.hf.apply(model, p)
        calls = p.checkpoint_calls
        prof = rt.kept_bytes(call, values, method="profiler")
        hooks = rt.kept_bytes(call, values)
        check(within(p.kept_bytes, prof, calls) and within(p.kept_bytes, hooks, calls),
              "%s at %d%% (%s): kept predicted %d, profiler %d, hooks %d" % (name, 100 * frac, p.policy,
                                                                             p.kept_bytes, prof, hooks))
        eq = same(base, step(model, batch))
        check(eq, "%s at %d%% (%s): the loss or a gradient differs from the unwrapped model's"
              % (name, 100 * frac, p.policy))
        pk = peak(model, batch, opt)
        check(near(p.device_peak_bytes, pk), "%s at %d%% (%s): peak predicted %d, measured %d"
              % (name, 100 * frac, p.policy, p.device_peak_bytes, pk))
        check.rows.append((name, "%d%%" % (100 * frac), p.kept_bytes, prof, p.device_peak_bytes, pk, eq, p.policy))
        if frac == 0.5:
            # evaluation after apply: eval() and no_grad run the layers as they are
            model.eval()
            with torch.no_grad():
                ev = model(**batch).loss
            model.train()
            with torch.no_grad():
                ng = model(**batch).loss
            rt.hf.unapply(model)
            model.eval()
            with torch.no_grad():
                ev0 = model(**batch).loss
            model.train()
            check(torch.equal(ev, ev0) and torch.isfinite(ng), "%s: eval()/no_grad after apply" % name)
            # budget= is the step's peak on the device: the plan's predicted peak within it
            dev_budget = p.device_peak_bytes
            # (the "Done when": remat_torch.plan(model, batch, budget=); remat_torch.apply(model, plan))
            q = rt.plan(model, batch, budget=dev_budget, table=table)
            check(q.device_peak_bytes <= dev_budget, "%s: budget=%d planned %s, predicted peak %d"
                  % (name, dev_budget, q.policy, q.device_peak_bytes))
            rt.apply(model, q)
            check(rt.hf.applied(model) is q and not any(isinstance(m, rt.RematCheckpoint) for m in model.modules()),
                  "%s: remat_torch.apply of an HF plan did not go through GradientCheckpointingLayer" % name)
            pq = peak(model, batch, opt)
            check(pq <= dev_budget * (1 + PEAK_UNDER), "%s: budget=%d (%s): measured peak %d" % (name, dev_budget, q.policy, pq))
        rt.hf.unapply(model)
    if name == "T5":
        nested(check, name, model, batch, table, base, opt, call, values)
    return table


def _walk(tree):
    for n in tree:
        yield n
        yield from _walk(n.children)


def nested(check, name, model, batch, table, base, opt, call, values):
    """two plans that nest checkpoints in a segment's frame (revolve's, nested all the way, and one the
    planner made on another run: a segment of three layers whose re-run holds a segment of two):
    kept bytes, gradients and peak as above"""
    found = [rt.hf.plan(model, batch, kept_budget=table.kept_bytes, table=table, policy=pol)
             for pol in ("revolve:4", "plan:C3.A1.A1.C2.A0.A0.A0.A0.A1.A1.A0")]
    deep = [sum(n.depth > 0 and (n.kind == "segment" or n.keep != "all") for n in _walk(p.tree)) for p in found]
    check(deep[0] >= 4 and deep[1] >= 1, "%s: the nested plans nest %s checkpoints" % (name, deep))
    for p in found:
        rt.hf.apply(model, p)
        prof = rt.kept_bytes(call, values, method="profiler")
        hooks = rt.kept_bytes(call, values)
        calls = p.checkpoint_calls
        check(within(p.kept_bytes, prof, calls) and within(p.kept_bytes, hooks, calls),
              "%s nested (%s): kept predicted %d, profiler %d, hooks %d" % (name, p.policy, p.kept_bytes, prof, hooks))
        eq = same(base, step(model, batch))
        check(eq, "%s nested (%s): the loss or a gradient differs from the unwrapped model's" % (name, p.policy))
        pk = peak(model, batch, opt)
        check(near(p.device_peak_bytes, pk), "%s nested (%s): peak predicted %d, measured %d"
              % (name, p.policy, p.device_peak_bytes, pk))
        check.rows.append((name, "nested", p.kept_bytes, prof, p.device_peak_bytes, pk, eq, p.policy))
        rt.hf.unapply(model)


def hf_orders(check, name, model, batch):
    """HF's gradient_checkpointing_enable() then a plan: taken over; a plan then HF's: refused"""
    base = step(model, batch)
    table = rt.hf.measure(model, batch)
    p = rt.hf.plan(model, batch, kept_budget=int(0.5 * table.kept_bytes), table=table)
    model.gradient_checkpointing_enable()
    t2 = rt.hf.measure(model, batch)
    check(t2.kept_bytes == table.kept_bytes and model.is_gradient_checkpointing,
          "%s: measure() under HF's checkpointing kept %d (without %d), or turned it off" % (name, t2.kept_bytes,
                                                                                        table.kept_bytes))
    rt.hf.apply(model, p)
    call, values = rt.hf.as_call(model, batch)
    prof = rt.kept_bytes(call, values, method="profiler")
    check(within(p.kept_bytes, prof, p.checkpoint_calls) and same(base, step(model, batch)),
          "%s: a plan after gradient_checkpointing_enable(): kept %d, predicted %d" % (name, prof, p.kept_bytes))
    try:
        model.gradient_checkpointing_enable()
        check(False, "%s: gradient_checkpointing_enable() on a model running a plan was not refused" % name)
    except rt.RematError as e:
        check("unapply" in e.message and "\n" not in e.message, "%s: the refusal says %r" % (name, e.message))
    # a forward that raises inside a segment (a hook of its second layer): the frame is closed, torch's
    # hooks are popped, and the next step is the unwrapped model's again
    seg = rt.hf.plan(model, batch, kept_budget=table.kept_bytes, table=table, policy="plan:A1.C2.A1.A1.A0")
    rt.apply(model, seg)
    layers = rt.hf.chains(model)[0][1]
    h = layers[2].register_forward_pre_hook(lambda m, a: (_ for _ in ()).throw(ValueError("raised in layer 2")))
    try:
        step(model, batch)
        check(False, "%s: the hook did not raise" % name)
    except ValueError:
        pass
    h.remove()
    check(same(base, step(model, batch)) and not torch._C._autograd._top_saved_tensors_default_hooks(False),
          "%s: after a forward that raised inside a segment" % name)
    rt.hf.unapply(model)
    model.gradient_checkpointing_enable()
    check(model.is_gradient_checkpointing, "%s: HF's checkpointing after unapply" % name)
    model.gradient_checkpointing_disable()


def trainer(check):
    """the documented step (remat_torch.hf.enable), then training: a Trainer run when accelerate
    is installed (Trainer needs it), and in any case two AdamW steps whose losses and weights are
    bit for bit those of the unwrapped model's"""
    tf = transformers
    torch.manual_seed(0)
    m = tf.LlamaForCausalLM(tf.LlamaConfig(**TEXT))
    m.train()
    ref = copy.deepcopy(m)
    ids = torch.randint(0, V, (4, T))
    batch = {"input_ids": ids[:2], "labels": ids[:2]}
    p = rt.hf.enable(m, batch, kept_budget="600KiB")
    check(p.checkpointed and rt.hf.applied(m) is p, "enable: %s" % p)
    runs = []
    for model in (ref, m):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for i in range(2):
            torch.manual_seed(i)
            loss = model(input_ids=ids[2 * i:2 * i + 2], labels=ids[2 * i:2 * i + 2]).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
        runs.append((losses, [q.detach().clone() for q in model.parameters()]))
    check(all(torch.equal(a, b) for a, b in zip(runs[0][0], runs[1][0])) and
          all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1])),
          "two AdamW steps with %s: losses %s against %s" % (p.policy, runs[1][0], runs[0][0]))
    try:
        import accelerate  # noqa: F401
    except ImportError:
        print("note: Trainer needs accelerate, which is not installed here: the Trainer run is left out")
        return
    import tempfile
    data = [{"input_ids": ids[i], "labels": ids[i]} for i in range(4)]
    with tempfile.TemporaryDirectory() as out:
        args = tf.TrainingArguments(output_dir=out, max_steps=2, per_device_train_batch_size=2, report_to=[],
                                    save_strategy="no", use_cpu=True, logging_strategy="no", disable_tqdm=True)
        res = tf.Trainer(model=m, args=args, train_dataset=data).train()
        check(rt.hf.applied(m) is p and res.global_step == 2, "Trainer with a plan: %s" % (res,))
        try:
            args = tf.TrainingArguments(output_dir=out, max_steps=1, gradient_checkpointing=True, report_to=[],
                                        use_cpu=True, save_strategy="no")
            tf.Trainer(model=m, args=args, train_dataset=data).train()
            check(False, "Trainer(gradient_checkpointing=True) on a model with a plan ran")
        except rt.RematError as e:
            check("unapply" in e.message, "Trainer(gradient_checkpointing=True): %s" % e.message)


def main():
    check = Checks()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    t0 = time.time()
    for name, model, batch in models():
        try:
            check_model(check, name, model, batch)
        except rt.RematError as e:
            check(False, "%s: %s" % (name, e.message))
        if name in ("Llama", "GPT2"):
            hf_orders(check, name, model, batch)
    trainer(check)
    print("\ntorch %s, transformers %s, %d threads, %.0f s" % (torch.__version__, transformers.__version__,
                                                               torch.get_num_threads(), time.time() - t0))
    print("%-8s %6s %10s %10s %8s %10s %10s %8s %5s  %s" % ("model", "budget", "kept pred", "measured", "error",
                                                             "peak pred", "measured", "error", "bits", "plan"))
    for r in check.rows:
        print("%-8s %6s %10d %10d %7.3f%% %10d %10d %7.3f%% %5s  %s" % (
            r[0], r[1], r[2], r[3], 100.0 * (r[2] - r[3]) / r[3], r[4], r[5], 100.0 * (r[4] - r[5]) / r[5],
            "equal" if r[6] else "DIFF", r[7]))
    return report(NAME, check.good, check.bad)


if __name__ == "__main__":
    sys.exit(main())
