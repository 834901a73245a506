"""torch_models.py -- the models and checks the remat_torch tests share (not a test).

Models written in plain torch: a GPT-2 (py_torch_oracle.py's math), a Llama
(py_llama_oracle.py's), a residual MLP, a small ResNet with BatchNorm whose
stages are nn.Sequentials (torchvision's layout: each stage's first block
downsamples), and an encoder-decoder stand-in whose blocks take their input
as a keyword and the encoder's output as a tensor keyword that needs a
gradient (ctx=).  The checks: one training step's loss, gradients and
buffers; predicted against measured kept bytes with the two bounds.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GPTBlock(nn.Module):
    def __init__(self, C, NH, T, p):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.drop = nn.Dropout(p)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = (t.reshape(B, T, self.NH, hs).transpose(1, 2) for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
        s = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))).masked_fill(~self.mask[:T, :T], float("-inf"))
        y = (self.drop(torch.softmax(s, dim=-1)) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.drop(self.c_proj(y))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class GPT2(nn.Module):
    def __init__(self, L, C, NH, V, T, p=0.0):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(GPTBlock(C, NH, T, p) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T)))
        for blk in self.h:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()                     # tied head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-6):
        super().__init__()
        self.w, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


class LlamaLayer(nn.Module):
    def __init__(self, C, NH, KV, hs, Fw):
        super().__init__()
        self.NH, self.KV, self.hs = NH, KV, hs
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C), RMSNorm(C)
        self.q_proj, self.k_proj = nn.Linear(C, NH * hs, bias=False), nn.Linear(C, KV * hs, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, KV * hs, bias=False), nn.Linear(NH * hs, C, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(C, Fw, bias=False), nn.Linear(C, Fw, bias=False)
        self.down_proj = nn.Linear(Fw, C, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.shape
        h2, rep = self.hs // 2, self.NH // self.KV

        def rope(t):                                 # Hugging Face's rotate_half convention
            return t * cos + torch.cat((-t[..., h2:], t[..., :h2]), dim=-1) * sin
        h = self.input_layernorm(x)
        q = rope(self.q_proj(h).reshape(B, T, self.NH, self.hs).transpose(1, 2))
        k = rope(self.k_proj(h).reshape(B, T, self.KV, self.hs).transpose(1, 2))
        v = self.v_proj(h).reshape(B, T, self.KV, self.hs).transpose(1, 2)
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = ((q @ k.transpose(-2, -1)) / math.sqrt(self.hs)).masked_fill(~mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, self.NH * self.hs)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, L, C, NH, KV, hs, Fw, V, T):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(LlamaLayer(C, NH, KV, hs, Fw) for _ in range(L))
        self.norm = RMSNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        inv = 1.0 / 10000 ** (torch.arange(0, hs, 2, dtype=torch.float32) / hs)
        ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril(), persistent=False)

    def forward(self, idx, targets):
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin, self.mask)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class ResBlock(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class ResidualMLP(nn.Module):
    """a residual MLP classifier: no transformer, no table of remat's"""

    def __init__(self, L, Din, D, classes):
        super().__init__()
        self.stem = nn.Linear(Din, D)
        self.blocks = nn.ModuleList(ResBlock(D) for _ in range(L))
        self.head = nn.Linear(D, classes)

    def forward(self, x, y):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return F.cross_entropy(self.head(x), y)



class BasicBlock(nn.Module):
    """torchvision's BasicBlock: conv-bn-relu-conv-bn, plus the input (downsampled when the
    stage's first block changes the shape)"""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    """a small torchvision-like ResNet: stem, stages of BasicBlocks in nn.Sequentials, pool, fc"""

    def __init__(self, widths=(8, 16), depths=(2, 5), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        stages, cin = [], widths[0]
        for i, (w, d) in enumerate(zip(widths, depths)):
            stages.append(nn.Sequential(*[BasicBlock(cin if j == 0 else w, w, 2 if (j == 0 and i) else 1)
                                          for j in range(d)]))
            cin = w
        self.layer1, self.layer2 = stages
        self.fc = nn.Linear(cin, classes)

    def forward(self, x, y):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return F.cross_entropy(self.fc(x.mean((2, 3))), y)


class KwBlock(nn.Module):
    """a decoder block called as blk(x=h, ctx=enc, scale=s): its input a keyword, the encoder's
    output a tensor keyword that needs a gradient (added, so that no block saves it)"""

    def __init__(self, D):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, x=None, ctx=None, scale=1.0):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x)))) + scale * ctx


class KwModel(nn.Module):
    def __init__(self, L, Din, D, classes):
        super().__init__()
        self.enc = nn.Linear(Din, D)
        self.stem = nn.Linear(Din, D)
        self.layers = nn.ModuleList(KwBlock(D) for _ in range(L))
        self.head = nn.Linear(D, classes)

    def forward(self, x, y):
        ctx = torch.tanh(self.enc(x))
        h = self.stem(x)
        for blk in self.layers:
            h = blk(x=h, ctx=ctx, scale=0.5)
        return F.cross_entropy(self.head(h), y)


class EncDecBlock(nn.Module):
    """a block of an encoder (cross False) or of a decoder, whose cross branch reads the encoder's
    result, given as the keyword mem= (a tensor that needs a gradient); dropout 0.1 on the branch"""

    def __init__(self, D, cross):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        self.drop = nn.Dropout(0.1)
        self.cross = nn.Linear(D, D) if cross else None

    def forward(self, x, mem=None):
        h = x + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))
        if self.cross is not None:
            h = h + torch.tanh(self.cross(mem)) * h
        return h


class EncDec(nn.Module):
    """two chains in two ModuleLists, as an encoder-decoder has them: enc's blocks, a final norm
    (its result, mem), then dec's blocks, each reading mem"""

    def __init__(self, Le, Ld, Din, D, classes):
        super().__init__()
        self.stem_e, self.stem_d = nn.Linear(Din, D), nn.Linear(Din, D)
        self.enc = nn.ModuleList(EncDecBlock(D, False) for _ in range(Le))
        self.norm_e = nn.LayerNorm(D)
        self.dec = nn.ModuleList(EncDecBlock(D, True) for _ in range(Ld))
        self.head = nn.Linear(D, classes)

    def forward(self, x, y):
        h = self.stem_e(x)
        for blk in self.enc:
            h = blk(h)
        mem = self.norm_e(h)
        g = self.stem_d(x)
        for blk in self.dec:
            g = blk(g, mem=mem)
        return F.cross_entropy(self.head(g), y)


# ---- one step, and the comparison of kept bytes ----------------------------------------

def step(model, inputs, seed):
    """loss, every gradient and every buffer after one step (from zero gradients, the RNG seeded);
    the buffers are put back after it, so that every step starts from the same statistics"""
    for p in model.parameters():
        p.grad = None
    before = [b.detach().clone() for b in model.buffers()]
    torch.manual_seed(seed)
    loss = model(*inputs)
    loss.backward()
    out = (loss.detach().clone(), [p.grad.clone() for p in model.parameters()],
           [b.detach().clone() for b in model.buffers()])
    with torch.no_grad():
        for b, v in zip(model.buffers(), before):
            b.copy_(v)
    return out


def same_step(a, b):
    return torch.equal(a[0], b[0]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1])) and \
        len(a[2]) == len(b[2]) and all(torch.equal(x, y) for x, y in zip(a[2], b[2]))


# the bounds on predicted against measured kept bytes: 1%, and a few bytes per checkpoint call
# (the profiler counts the loss and torch's small scalars too: ABS_BASE)
REL_BOUND, ABS_BASE, ABS_PER_CALL = 0.01, 64, 8


def kept_ok(pred, measured, calls):
    """whether measured is within both bounds of the prediction"""
    return abs(measured - pred) <= REL_BOUND * pred and abs(measured - pred) <= ABS_BASE + ABS_PER_CALL * calls
