#!/bin/sh
# Hugging Face model directories through the command line:
#   - remat export --format hf writes config.json and the safetensors
#     (sharded above --shard-size, with the index), for Llama and GPT-2;
#   - remat train --init-from DIR takes the architecture and every size
#     from config.json: a model loaded from the directory and exported again
#     (one step at learning rate 0, which leaves every weight as it was) gives
#     the same files, byte for byte, F32 and BF16;
#   - a flag that contradicts config.json, and a broken directory, are
#     refused in one line.
set -u
. "$(dirname "$0")/lib.sh"
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
cd "$T" || exit 1
quiet="--threads 1 --eval-every 0 --sample 0"
llama="--arch llama --layers 2 --dim 48 --heads 4 --kv-heads 2 --head-dim 10 --ffn-dim 72 --rope-theta 5e5 \
--rope-scaling llama3:8:1:4:16 --norm-eps 1e-5 --seq 16 --batch 2"

# Llama, untied, sharded F32
$R train $llama $quiet --steps 3 --save ck > /dev/null || bad "llama run failed"
$R export --resume ck --out hf --shard-size 50KB > /dev/null && [ -f hf/config.json ] &&
    [ -f hf/model.safetensors.index.json ] && [ -f hf/model-00002-of-00005.safetensors ] && ok ||
    bad "export --format hf (sharded): $(ls hf 2>&1 | tr '\n' ' ')"
/usr/bin/python3 - hf/config.json <<'PY' && ok || bad "config.json holds the model's architecture"
import json, sys
c = json.load(open(sys.argv[1]))
want = {"model_type": "llama", "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 10, "intermediate_size": 72, "rope_theta": 5e5, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False, "vocab_size": 256}
for k, v in want.items(): assert c[k] == v, (k, c[k], v)
r = c["rope_scaling"]
assert r["rope_type"] == "llama3" and r["factor"] == 8 and r["original_max_position_embeddings"] == 16, r
PY
# no architecture flag needed: the directory sets them all
$R train --init-from hf --seq 16 --batch 2 $quiet --steps 1 --lr 0 --save ck2 > /dev/null || bad "train --init-from hf failed"
$R export --resume ck2 --out hf2 --shard-size 50KB > /dev/null || bad "export of the loaded model failed"
same=1
for f in hf/*; do cmp -s "$f" "hf2/$(basename "$f")" || { same=0; echo "differs: $f" >&2; }; done
[ "$same" = 1 ] && [ "$(ls hf | wc -l)" = "$(ls hf2 | wc -l)" ] && ok || bad "directory -> model -> directory is not the same files"
# BF16, one file
$R export --resume ck --out hf16 --dtype bf16 > /dev/null && [ -f hf16/model.safetensors ] && ok || bad "export bf16"
$R train --init-from hf16 --seq 16 --batch 2 $quiet --steps 1 --lr 0 --save ck3 > /dev/null &&
    $R export --resume ck3 --out hf16b --dtype bf16 > /dev/null && cmp -s hf16/model.safetensors hf16b/model.safetensors &&
    cmp -s hf16/config.json hf16b/config.json && ok || bad "bf16 directory round trip"
# contradicting flags, one line each
expect_err 'init-from hf --kv-heads 4' $R train --init-from hf --kv-heads 4 --steps 1
expect_err 'init-from hf --arch gpt2' $R train --init-from hf --arch gpt2 --steps 1
expect_err 'init-from hf --rope-theta 10000' $R train --init-from hf --rope-theta 10000 --steps 1
expect_err 'init-from hf --tie-embeddings' $R train --init-from hf --tie-embeddings --steps 1
# broken directories
mkdir -p broken && cp hf/config.json broken/
expect_err 'init-from a directory without weights' $R train --init-from broken --steps 1
cp -r hf badidx && rm badidx/model-00002-of-00005.safetensors
expect_err 'init-from an index naming a missing shard' $R train --init-from badidx --steps 1
sed 's/"llama"/"mistral"/' hf/config.json > broken/config.json
expect_err 'init-from an unknown model_type' $R train --init-from broken --steps 1

# a bare safetensors file with Llama's names and no metadata: the heads
# from the flag, KV and hs solved from the shapes; a contradicting one refused
$R export --resume ck --out l.safetensors > /dev/null || bad "export safetensors"
/usr/bin/python3 - <<'PY' || bad "strip the metadata"
import json, struct
b = open("l.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
s = json.dumps(h).encode(); s += b" " * ((8 - (8 + len(s)) % 8) % 8)
open("bare.safetensors", "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
expect_err 'init-from a bare file without --heads' $R train --init-from bare.safetensors --steps 1
$R train --init-from bare.safetensors --heads 4 --rope-theta 5e5 --rope-scaling llama3:8:1:4:16 --norm-eps 1e-5 \
    --seq 16 --batch 2 $quiet --steps 1 --lr 0 --save ck4 > /dev/null &&
    $R export --resume ck4 --out hf4 --shard-size 50KB > /dev/null && cmp -s hf/config.json hf4/config.json &&
    cmp -s hf/model-00003-of-00005.safetensors hf4/model-00003-of-00005.safetensors && ok ||
    bad "a bare file with --heads: KV and hs solved from the shapes"
expect_err 'init-from a bare file --kv-heads 1' $R train --init-from bare.safetensors --heads 4 --kv-heads 1 --steps 1

# GPT-2 (tied, biases) the same way
$R train --layers 2 --dim 32 --heads 2 --seq 16 --batch 2 $quiet --steps 2 --save g > /dev/null || bad "gpt2 run failed"
$R export --resume g --out ghf --format hf > /dev/null && [ -f ghf/model.safetensors ] && ok || bad "gpt2 export hf"
grep -q '"model_type": "gpt2"' ghf/config.json && ok || bad "gpt2 config.json"
$R train --init-from ghf --seq 16 --batch 2 $quiet --steps 1 --lr 0 --save g2 > /dev/null &&
    $R export --resume g2 --out ghf2 --format hf > /dev/null && cmp -s ghf/model.safetensors ghf2/model.safetensors &&
    ok || bad "gpt2 directory round trip"
finish cli_hf
