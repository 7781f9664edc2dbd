import argparse
exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'common.py')).read())
ap_ = argparse.ArgumentParser()
ap_.add_argument('--L', type=int, default=64); ap_.add_argument('--bs', type=int, default=32)
ap_.add_argument('--V', type=int, default=4096); ap_.add_argument('--lr', type=float, default=3e-3)
ap_.add_argument('--layers', type=int, default=2); ap_.add_argument('--hidden', type=int, default=128)
ap_.add_argument('--steps', type=int, default=600); ap_.add_argument('--kind', default='half')
a = ap_.parse_args(); print(vars(a))
torch.manual_seed(0); rng = np.random.default_rng(0)
m = model(a.layers, a.hidden)
opt = torch.optim.AdamW(m.parameters(), lr=a.lr, betas=(0.9,0.95), weight_decay=0.0)
t0=time.time(); ema=None
for step in range(a.steps):
    h2 = a.L//2
    x = rng.integers(3, a.V, size=(a.bs, h2)); ids = torch.as_tensor(np.concatenate([x, x], 1))
    for g in opt.param_groups: g['lr'] = a.lr*min(1,(step+1)/50)
    h = m.hidden(ids)[:, h2:-1]
    loss = F.cross_entropy(m.logits(h).reshape(-1, 4096), ids[:, h2+1:].reshape(-1))
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    ema = loss.item() if ema is None else 0.9*ema+0.1*loss.item()
    if step % 50 == 0: print(step, round(ema,3), f"{time.time()-t0:.0f}s", flush=True)
torch.save(m.state_dict(), f'/tmp/synth_{a.layers}x{a.hidden}.pt')
