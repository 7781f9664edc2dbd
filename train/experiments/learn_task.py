import argparse
exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'common.py')).read())
ap_ = argparse.ArgumentParser()
ap_.add_argument('--tasks', default='niah_single_filler')
ap_.add_argument('--ctx', type=int, default=256)
ap_.add_argument('--n', type=int, default=8192)
ap_.add_argument('--bs', type=int, default=16)
ap_.add_argument('--layers', type=int, default=2)
ap_.add_argument('--hidden', type=int, default=128)
ap_.add_argument('--lr', type=float, default=2e-3)
ap_.add_argument('--lmw', type=float, default=0.0)
ap_.add_argument('--synth', type=int, default=0, help='synthetic copy rows per batch')
ap_.add_argument('--synth-len', type=int, default=256)
ap_.add_argument('--steps', type=int, default=400)
ap_.add_argument('--warm', type=int, default=50)
ap_.add_argument('--every', type=int, default=50)
ap_.add_argument('--wd', type=float, default=0.05)
ap_.add_argument('--seed', type=int, default=0)
ap_.add_argument('--init', default='')
ap_.add_argument('--maxtime', type=float, default=300)
a = ap_.parse_args()
print(vars(a), flush=True)
torch.manual_seed(a.seed); np.random.seed(a.seed); random.seed(a.seed)
tasks = a.tasks.split(',')
train = []
for t in tasks:
    train += gen(t, a.ctx, a.n // len(tasks), seed=a.seed)
held = {t: gen(t, a.ctx, 32, seed=a.seed+1000003, text='/tmp/tt/heldout') for t in tasks}
random.shuffle(train)
rng = np.random.default_rng(a.seed)
def synth(n):
    rows = []
    L = a.synth_len
    for _ in range(n):
        seq = rng.integers(3, 4096, size=L); mask = np.zeros(L, bool)
        for _k in range(max(1, L // 64)):
            ln = int(rng.integers(8, 33)); dst = int(rng.integers(L//4, L-ln+1)); src = int(rng.integers(0, dst-ln+1))
            seq[dst:dst+ln] = seq[src:src+ln]; mask[dst+1:dst+ln] = True
        rows.append((seq, mask))
    return rows
m = model(a.layers, a.hidden)
if a.init: m.load_state_dict(torch.load(a.init))
decay = [p for p in m.parameters() if p.dim() >= 2]; nodecay = [p for p in m.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": nodecay, "weight_decay": 0}], lr=a.lr, betas=(0.9,0.95))
t0 = time.time(); k = 0; ema = None; sema = None
for step in range(a.steps + 1):
    if step % a.every == 0 or step == a.steps or time.time()-t0 > a.maxtime:
        em = {t: sum(T.exact_match(m, held[t], EOS, torch.device('cpu'), False)) for t in tasks}
        print(f"step {step} t {time.time()-t0:.0f}s ans-loss {ema if ema is None else round(ema,3)} synth-loss {sema if sema is None else round(sema,3)} EM/32 {em}", flush=True)
    if step == a.steps or time.time()-t0 > a.maxtime: break
    b = train[k:k+a.bs]; k += a.bs
    if k >= len(train): k = 0; random.shuffle(train)
    ids, ap, at, lp, lt = T.collate(b, a.ctx, EOS, torch.device('cpu'))[:5]
    for g in opt.param_groups: g['lr'] = a.lr * min(1, (step+1)/a.warm)
    loss, la, _ = T.loss_fn(m, ids, ap, at, lp, lt, a.lmw)
    if a.synth:
        rows = synth(a.synth)
        sid = torch.as_tensor(np.stack([r[0] for r in rows]))
        smask = torch.as_tensor(np.stack([r[1] for r in rows]))
        h = m.hidden(sid)
        pos = smask[:, 1:].reshape(-1).nonzero().squeeze(1)
        hh = h[:, :-1].reshape(-1, h.shape[-1])[pos]
        ls = F.cross_entropy(m.logits(hh), sid[:, 1:].reshape(-1)[pos])
        loss = loss + ls
        sema = ls.item() if sema is None else 0.9*sema + 0.1*ls.item()
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    ema = la.item() if ema is None else 0.9*ema + 0.1*la.item()
