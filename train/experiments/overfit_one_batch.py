exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'common.py')).read())
torch.manual_seed(0)
ss = gen('niah_single_filler', 512, 8)
m = model(2, 128)
opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9,0.95), weight_decay=0)
ids, ap, at, lp, lt = T.collate(ss, 512, EOS, torch.device('cpu'))[:5]
print(ids.shape, ap.shape)
t0=time.time()
for step in range(301):
    loss, la, _ = T.loss_fn(m, ids, ap, at, lp, lt, 0.0)
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 25 == 0:
        em = T.exact_match(m, ss, EOS, torch.device('cpu'), False)
        print(step, round(la.item(),3), sum(em), round(time.time()-t0,1), flush=True)
