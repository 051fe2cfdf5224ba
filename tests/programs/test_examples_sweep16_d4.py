"""Sweep 16 (D), part 4: pytorch/examples' gat (load_cora's preprocessing on a random graph:
reciprocal row sums with inf -> 0, a sparse diagonal matmul, a COO int64 adjacency plus
eye; GraphAttentionLayer with .mT scores and the -9e16 where-mask) and vision_transformer
(patches by two unfolds, MultiheadAttention, GELU, a class token cat and an in-place
positional add, Adam with weight decay). See tutorial_harness.py."""
import numpy as np
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def gat(torch, env, concat=False):
    nn, F = torch.nn, torch.nn.functional

    class GraphAttentionLayer(nn.Module):
        def __init__(self, in_features, out_features, n_heads, concat=False, dropout=0.4,
                     leaky_relu_slope=0.2):
            super().__init__()
            self.n_heads, self.concat, self.dropout = n_heads, concat, dropout
            if concat:
                self.out_features = out_features
                self.n_hidden = out_features // n_heads
            else:
                self.n_hidden = out_features
            self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
            self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
            self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
            nn.init.xavier_normal_(self.W)
            nn.init.xavier_normal_(self.a)

        def _get_attention_scores(self, h_transformed):
            source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
            target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
            return self.leakyrelu(source_scores + target_scores.mT)

        def forward(self, h, adj_mat):
            n_nodes = h.shape[0]
            h_transformed = torch.mm(h, self.W)
            h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
            h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
            e = self._get_attention_scores(h_transformed)
            connectivity_mask = -9e16 * torch.ones_like(e)
            e = torch.where(adj_mat > 0, e, connectivity_mask)
            attention = F.softmax(e, dim=-1)
            attention = F.dropout(attention, self.dropout, training=self.training)
            h_prime = torch.matmul(attention, h_transformed)
            if self.concat:
                return h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.out_features)
            return h_prime.mean(dim=0)

    class GAT(nn.Module):
        def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False, dropout=0.4):
            super().__init__()
            self.gat1 = GraphAttentionLayer(in_features, n_hidden, n_heads, concat, dropout)
            self.gat2 = GraphAttentionLayer(n_hidden, num_classes, 1, False, dropout)

        def forward(self, input_tensor, adj_mat):
            x = F.elu(self.gat1(input_tensor, adj_mat))
            return F.log_softmax(self.gat2(x, adj_mat), dim=1)

    V, E, nfeat = 14, 30, 12
    rng = np.random.default_rng(5)
    words = (rng.random((V, nfeat)) < 0.3).astype(np.int32)
    words[3] = 0                                # a node without words: 1/0 -> inf -> 0
    edges = rng.integers(0, V, (E, 2)).astype(np.int32)
    labels = torch.LongTensor(rng.integers(0, 3, V))
    features = torch.FloatTensor(words)
    scale_vector = torch.sum(features, dim=1)
    scale_vector = 1 / scale_vector
    scale_vector[scale_vector == float('inf')] = 0
    scale_vector = torch.diag(scale_vector).to_sparse()
    features = scale_vector @ features
    adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
    adj_mat = torch.eye(V) + adj_mat
    env.rec("features", features)
    env.rec("adj", adj_mat)
    env.rec("adj layout", str(adj_mat.layout).split(".")[-1])

    model = env.init(GAT(nfeat, 8, 4, 3, concat=concat, dropout=0.6))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    criterion = nn.NLLLoss()
    idx = torch.tensor(rng.permutation(V))
    idx_val, idx_train = idx[:4], idx[4:]

    def train_iter(input, target, mask_train):
        model.eval()        # (dropout draws differ between the libraries)
        optimizer.zero_grad()
        output = model(*input)
        loss = criterion(output[mask_train], target[mask_train])
        loss.backward()
        optimizer.step()
        return loss

    def test(input, target, mask):
        model.eval()
        with torch.no_grad():
            output = model(*input)
            output, target = output[mask], target[mask]
            loss = criterion(output, target)
            acc = (output.argmax(dim=1) == target).float().sum() / len(target)
        return loss.item(), acc.item()

    train_iter = env.step(train_iter)
    for epoch in range(4):
        env.rec(f"loss {epoch}", train_iter((features, adj_mat), labels, idx_train))
        env.rec(f"val {epoch}", test((features, adj_mat), labels, idx_val))
    env.rec("params", dict(model.named_parameters()))


@pytest.mark.slow      # (the concat-heads variant runs in the default set)
def test_gat():
    run_tutorial(gat, rtol=1e-5, atol=1e-6)


def test_gat_concat_heads():
    run_tutorial(lambda torch, env: gat(torch, env, concat=True), rtol=1e-5, atol=1e-6)


def vit(torch, env):
    nn, optim = torch.nn, torch.optim
    patch_size, n_channels, latent, heads, batch, classes = 4, 3, 16, 2, 3, 5

    class PatchExtractor(nn.Module):
        def __init__(self, patch_size=16):
            super().__init__()
            self.patch_size = patch_size

        def forward(self, input_data):
            batch_size, channels, height, width = input_data.size()
            num_patches = (height // self.patch_size) * (width // self.patch_size)
            return input_data.unfold(2, self.patch_size, self.patch_size). \
                unfold(3, self.patch_size, self.patch_size). \
                permute(0, 2, 3, 1, 4, 5).contiguous().view(batch_size, num_patches, -1)

    class InputEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.LinearProjection = nn.Linear(patch_size * patch_size * n_channels, latent)
            self.class_token = nn.Parameter(torch.randn(batch, 1, latent).to(torch.device("cpu")))
            self.pos_embedding = nn.Parameter(torch.randn(batch, 1, latent).to(torch.device("cpu")))

        def forward(self, input_data):
            patches = PatchExtractor(patch_size=patch_size)(input_data)
            linear_projection = self.LinearProjection(patches)
            b, n, _ = linear_projection.shape
            linear_projection = torch.cat((self.class_token, linear_projection), dim=1)
            pos_embed = self.pos_embedding[:, :n + 1, :]
            linear_projection += pos_embed
            return linear_projection

    class EncoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(latent)
            self.attention = nn.MultiheadAttention(latent, heads, dropout=0.0)
            self.enc_MLP = nn.Sequential(nn.Linear(latent, latent * 4), nn.GELU(), nn.Dropout(0.0),
                                         nn.Linear(latent * 4, latent), nn.Dropout(0.0))

        def forward(self, emb_patches):
            first_norm = self.norm(emb_patches)
            attention_out = self.attention(first_norm, first_norm, first_norm)[0]
            first_added = attention_out + emb_patches
            return self.enc_MLP(self.norm(first_added)) + first_added

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = InputEmbedding()
            self.encoders = nn.ModuleList([EncoderBlock() for _ in range(2)])
            self.MLPHead = nn.Sequential(nn.LayerNorm(latent), nn.Linear(latent, latent),
                                         nn.Linear(latent, classes))

        def forward(self, test_input):
            enc_output = self.embedding(test_input)
            for enc_layer in self.encoders:
                enc_output = enc_layer(enc_output)
            return self.MLPHead(enc_output[:, 0])

    model = env.init(ViT())
    optimizer = optim.Adam(model.parameters(), lr=1e-2, weight_decay=3e-2)
    criterion = nn.CrossEntropyLoss()

    def train_fn(images, labels):
        model.train()
        optimizer.zero_grad()
        logits = model(images)
        loss = criterion(logits, labels)
        loss.backward()
        optimizer.step()
        return loss

    train_fn = env.step(train_fn)
    total_loss = 0.0
    for t in range(3):
        loss = train_fn(env.rand(batch, n_channels, 8, 12), env.randint(0, classes, (batch,)))
        total_loss += loss.item()
        env.rec(f"loss {t}", loss)
    env.rec("mean loss", total_loss / 3)
    # (the key projection's bias shifts every score of a query alike, which softmax removes:
    # its gradient is zero up to rounding and Adam turns that into whole steps)
    params = dict(model.named_parameters())
    for i in range(2):
        b = params.pop(f"encoders.{i}.attention.in_proj_bias")
        params[f"q,v bias {i}"] = torch.cat([b[:latent], b[2 * latent:]])
    env.rec("params", params)
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(env.rand(batch, n_channels, 8, 12)))


def test_vision_transformer():
    run_tutorial(vit, rtol=1e-4, atol=1e-5)


def test_hub_names(monkeypatch, capsys):
    """vision_transformer imports `from torch.hub import tqdm`; hub's cache directory."""
    import torch

    import llgrad
    monkeypatch.setenv("TORCH_HOME", "/tmp/some-torch-home")
    assert llgrad.hub.get_dir() == torch.hub.get_dir()
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    try:
        llgrad.hub.set_dir("~/elsewhere")
        torch.hub.set_dir("~/elsewhere")
        assert llgrad.hub.get_dir() == torch.hub.get_dir()
    finally:
        llgrad.hub.set_dir(None)
        torch.hub._hub_dir = None
    assert llgrad.hub.get_dir() == torch.hub.get_dir()
    for lib in (torch, llgrad):
        with lib.hub.tqdm(total=4, desc="EPOCH") as bar:
            bar.update(1)
            bar.set_description("x")
    err = capsys.readouterr().err
    half = err.find("\n") + 1
    assert err[:half] == err[half:]
