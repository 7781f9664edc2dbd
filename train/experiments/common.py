import sys, json, time, math, random, subprocess, os
import numpy as np, torch, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import train as T
torch.set_num_threads(2)
EOS = 0
def gen(task, ctx, n, first=0, seed=0, text='/tmp/tt/train'):
    cmd = ['build/oasiskv','eval','--dump-samples','-','-m','train/tokenizer','--text-dir',text,'--task',task,
           '--context-len',str(ctx),'--num-samples',str(n),'--first-index',str(first),'--seed',str(seed)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    out=[]
    for line in r.stdout.splitlines():
        d=json.loads(line)
        out.append({"task": d["task"], "ctx": d["context_len"], "index": d["index"],
                    "prompt": np.asarray(d["prompt_tokens"], dtype=np.int64),
                    "target": np.asarray(d["target_tokens"], dtype=np.int64), "answer": d["target"]})
    return out
def model(layers=2, hidden=128, heads=None, kv=None, vocab=4096):
    heads = heads or hidden//64
    kv = kv or max(1, heads//2)
    c = dict(hidden_size=hidden, intermediate_size=3*hidden, num_hidden_layers=layers, num_attention_heads=heads,
             num_key_value_heads=kv, head_dim=64, vocab_size=vocab, rms_norm_eps=1e-5, rope_theta=T.ROPE_THETA)
    return T.Llama(c)
