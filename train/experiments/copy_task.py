import argparse
exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'common.py')).read())
ap_ = argparse.ArgumentParser()
ap_.add_argument('--L', type=int, default=128); ap_.add_argument('--bs', type=int, default=32)
ap_.add_argument('--lr', type=float, default=3e-3)
ap_.add_argument('--layers', type=int, default=2); ap_.add_argument('--hidden', type=int, default=128)
ap_.add_argument('--steps', type=int, default=600); ap_.add_argument('--std', type=float, default=0.02); ap_.add_argument('--V', type=int, default=4096); ap_.add_argument('--out', default='')
a = ap_.parse_args(); print(vars(a))
torch.manual_seed(0); rng = np.random.default_rng(0)
def make(bs, L):
    ids = rng.integers(3, a.V, size=(bs, L)); mask = np.zeros((bs, L), bool)
    for r in range(bs):
        ln = int(rng.integers(8, L//4)); dst = int(rng.integers(L//2, L-ln+1)); src = int(rng.integers(0, dst-ln+1))
        ids[r, dst:dst+ln] = ids[r, src:src+ln]; mask[r, dst+1:dst+ln] = True
    return torch.as_tensor(ids), torch.as_tensor(mask)
m = model(a.layers, a.hidden)
for n_, p_ in m.named_parameters():
    if p_.dim() == 2 and 'embed' not in n_: torch.nn.init.normal_(p_, std=a.std)
opt = torch.optim.AdamW(m.parameters(), lr=a.lr, betas=(0.9,0.95), weight_decay=0.0)
t0=time.time(); ema=None
for step in range(a.steps):
    ids, mask = make(a.bs, a.L)
    for g in opt.param_groups: g['lr'] = a.lr*min(1,(step+1)/50)
    h = m.hidden(ids)[:, :-1]; tm = mask[:, 1:]
    loss = F.cross_entropy(m.logits(h[tm]), ids[:, 1:][tm])
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    ema = loss.item() if ema is None else 0.9*ema+0.1*loss.item()
    if step % 50 == 0: print(step, round(ema,3), f"{time.time()-t0:.0f}s", flush=True)
if a.out: torch.save(m.state_dict(), a.out)
