"""Sweep 17 (D), part 7: UvA tutorials 6 and 12 at toy sizes: the transformer that learns
to reverse a sequence (multi-head attention from qkv chunks, sinusoidal positional
encoding as a non-persistent buffer, a CosineWarmupScheduler subclassing _LRScheduler,
attention maps, a DataLoader with shuffle) and the gated PixelCNN (masked convolutions
whose weights are multiplied by their mask buffers in forward, dilation, a 5-d
cross-entropy, the receptive field from an input gradient, pixel-by-pixel sampling with
torch.multinomial, autocompletion). See tutorial_harness.py."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def transformer_reverse(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    torch.manual_seed(42)

    def scaled_dot_product(q, k, v, mask=None):
        d_k = q.size()[-1]
        attn_logits = torch.matmul(q, k.transpose(-2, -1))
        attn_logits = attn_logits / math.sqrt(d_k)
        if mask is not None:
            attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
        attention = F.softmax(attn_logits, dim=-1)
        values = torch.matmul(attention, v)
        return values, attention

    class MultiheadAttention(nn.Module):
        def __init__(self, input_dim, embed_dim, num_heads):
            super().__init__()
            self.embed_dim, self.num_heads = embed_dim, num_heads
            self.head_dim = embed_dim // num_heads
            self.qkv_proj = nn.Linear(input_dim, 3 * embed_dim)
            self.o_proj = nn.Linear(embed_dim, embed_dim)
            nn.init.xavier_uniform_(self.qkv_proj.weight)
            self.qkv_proj.bias.data.fill_(0)
            nn.init.xavier_uniform_(self.o_proj.weight)
            self.o_proj.bias.data.fill_(0)
        def forward(self, x, mask=None, return_attention=False):
            batch_size, seq_length, _ = x.size()
            qkv = self.qkv_proj(x)
            qkv = qkv.reshape(batch_size, seq_length, self.num_heads, 3 * self.head_dim)
            qkv = qkv.permute(0, 2, 1, 3)
            q, k, v = qkv.chunk(3, dim=-1)
            values, attention = scaled_dot_product(q, k, v, mask=mask)
            values = values.permute(0, 2, 1, 3)
            values = values.reshape(batch_size, seq_length, self.embed_dim)
            o = self.o_proj(values)
            return (o, attention) if return_attention else o

    class EncoderBlock(nn.Module):
        def __init__(self, input_dim, num_heads, dim_feedforward, dropout=0.0):
            super().__init__()
            self.self_attn = MultiheadAttention(input_dim, input_dim, num_heads)
            self.linear_net = nn.Sequential(
                nn.Linear(input_dim, dim_feedforward), nn.Dropout(dropout),
                nn.ReLU(inplace=True), nn.Linear(dim_feedforward, input_dim))
            self.norm1, self.norm2 = nn.LayerNorm(input_dim), nn.LayerNorm(input_dim)
            self.dropout = nn.Dropout(dropout)
        def forward(self, x, mask=None):
            attn_out = self.self_attn(x, mask=mask)
            x = x + self.dropout(attn_out)
            x = self.norm1(x)
            linear_out = self.linear_net(x)
            x = x + self.dropout(linear_out)
            x = self.norm2(x)
            return x

    class TransformerEncoder(nn.Module):
        def __init__(self, num_layers, **block_args):
            super().__init__()
            self.layers = nn.ModuleList([EncoderBlock(**block_args) for _ in range(num_layers)])
        def forward(self, x, mask=None):
            for l in self.layers:
                x = l(x, mask=mask)
            return x
        def get_attention_maps(self, x, mask=None):
            attention_maps = []
            for l in self.layers:
                _, attn_map = l.self_attn(x, mask=mask, return_attention=True)
                attention_maps.append(attn_map)
                x = l(x)
            return attention_maps

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=5000):
            super().__init__()
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0)
            self.register_buffer('pe', pe, persistent=False)
        def forward(self, x):
            return x + self.pe[:, :x.size(1)]

    class CosineWarmupScheduler(optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, warmup, max_iters):
            self.warmup = warmup
            self.max_num_iters = max_iters
            super().__init__(optimizer)
        def get_lr(self):
            lr_factor = self.get_lr_factor(epoch=self.last_epoch)
            return [base_lr * lr_factor for base_lr in self.base_lrs]
        def get_lr_factor(self, epoch):
            lr_factor = 0.5 * (1 + np.cos(np.pi * epoch / self.max_num_iters))
            if epoch <= self.warmup:
                lr_factor *= epoch * 1.0 / self.warmup
            return lr_factor

    class ReversePredictor(nn.Module):
        def __init__(self, input_dim, model_dim, num_classes, num_heads, num_layers):
            super().__init__()
            self.num_classes = num_classes
            self.input_net = nn.Sequential(nn.Dropout(0.0), nn.Linear(input_dim, model_dim))
            self.positional_encoding = PositionalEncoding(d_model=model_dim)
            self.transformer = TransformerEncoder(num_layers=num_layers, input_dim=model_dim,
                                                  dim_feedforward=2 * model_dim, num_heads=num_heads)
            self.output_net = nn.Sequential(nn.Linear(model_dim, model_dim), nn.LayerNorm(model_dim),
                                            nn.ReLU(inplace=True), nn.Linear(model_dim, num_classes))
        def forward(self, x, mask=None, add_positional_encoding=True):
            x = self.input_net(x)
            if add_positional_encoding:
                x = self.positional_encoding(x)
            x = self.transformer(x, mask=mask)
            return self.output_net(x)
        def _calculate_loss(self, batch):
            inp_data, labels = batch
            inp_data = F.one_hot(inp_data, num_classes=self.num_classes).float()
            preds = self.forward(inp_data, add_positional_encoding=True)
            loss = F.cross_entropy(preds.view(-1, preds.size(-1)), labels.view(-1))
            acc = (preds.argmax(dim=-1) == labels).float().mean()
            return loss, acc

    model = ReversePredictor(input_dim=10, model_dim=16, num_classes=10, num_heads=2, num_layers=1)
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    lr_scheduler = CosineWarmupScheduler(optimizer, warmup=3, max_iters=20)
    data = torch.randint(10, size=(16, 8))
    labels = torch.flip(data, dims=(1,))
    dataset = torch.utils.data.TensorDataset(data, labels)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True, drop_last=True)

    def training_step(batch):
        loss, acc = model._calculate_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, acc
    training_step = env.step(training_step)
    for epoch in range(2):
        for batch in loader:
            env.rec(f"train {epoch}", training_step(batch))
            lr_scheduler.step()
            env.rec(f"lr {epoch}", lr_scheduler.get_last_lr())
    model.eval()
    with torch.no_grad():
        env.rec("val", model._calculate_loss((data[:4], labels[:4])))
        inp = F.one_hot(data[:2], num_classes=10).float()
        inp = model.input_net(inp)
        inp = model.positional_encoding(inp)
        env.rec("attn maps", model.transformer.get_attention_maps(inp))
        mask = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
        env.rec("masked", model.transformer(inp, mask=mask))
    # (the key bias's gradient is zero up to rounding, which Adam scales up to steps of lr)
    env.rec("state", {k: v for k, v in model.state_dict().items() if "qkv_proj.bias" not in k})


def pixelcnn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)

    class MaskedConvolution(nn.Module):
        def __init__(self, c_in, c_out, mask, **kwargs):
            super().__init__()
            kernel_size = (mask.shape[0], mask.shape[1])
            dilation = 1 if "dilation" not in kwargs else kwargs["dilation"]
            padding = tuple([dilation * (kernel_size[i] - 1) // 2 for i in range(2)])
            self.conv = nn.Conv2d(c_in, c_out, kernel_size, padding=padding, **kwargs)
            self.register_buffer('mask', mask[None, None])
        def forward(self, x):
            self.conv.weight.data *= self.mask
            return self.conv(x)

    class VerticalStackConvolution(MaskedConvolution):
        def __init__(self, c_in, c_out, kernel_size=3, mask_center=False, **kwargs):
            mask = torch.ones(kernel_size, kernel_size)
            mask[kernel_size // 2 + 1:, :] = 0
            if mask_center:
                mask[kernel_size // 2, :] = 0
            super().__init__(c_in, c_out, mask, **kwargs)

    class HorizontalStackConvolution(MaskedConvolution):
        def __init__(self, c_in, c_out, kernel_size=3, mask_center=False, **kwargs):
            mask = torch.ones(1, kernel_size)
            mask[0, kernel_size // 2 + 1:] = 0
            if mask_center:
                mask[0, kernel_size // 2] = 0
            super().__init__(c_in, c_out, mask, **kwargs)

    class GatedMaskedConv(nn.Module):
        def __init__(self, c_in, **kwargs):
            super().__init__()
            self.conv_vert = VerticalStackConvolution(c_in, c_out=2 * c_in, **kwargs)
            self.conv_horiz = HorizontalStackConvolution(c_in, c_out=2 * c_in, **kwargs)
            self.conv_vert_to_horiz = nn.Conv2d(2 * c_in, 2 * c_in, kernel_size=1, padding=0)
            self.conv_horiz_1x1 = nn.Conv2d(c_in, c_in, kernel_size=1, padding=0)
        def forward(self, v_stack, h_stack):
            v_stack_feat = self.conv_vert(v_stack)
            v_val, v_gate = v_stack_feat.chunk(2, dim=1)
            v_stack_out = torch.tanh(v_val) * torch.sigmoid(v_gate)
            h_stack_feat = self.conv_horiz(h_stack)
            h_stack_feat = h_stack_feat + self.conv_vert_to_horiz(v_stack_feat)
            h_val, h_gate = h_stack_feat.chunk(2, dim=1)
            h_stack_feat = torch.tanh(h_val) * torch.sigmoid(h_gate)
            h_stack_out = self.conv_horiz_1x1(h_stack_feat)
            h_stack_out = h_stack_out + h_stack
            return v_stack_out, h_stack_out

    class PixelCNN(nn.Module):
        def __init__(self, c_in, c_hidden):
            super().__init__()
            self.conv_vstack = VerticalStackConvolution(c_in, c_hidden, mask_center=True)
            self.conv_hstack = HorizontalStackConvolution(c_in, c_hidden, mask_center=True)
            self.conv_layers = nn.ModuleList([
                GatedMaskedConv(c_hidden), GatedMaskedConv(c_hidden, dilation=2), GatedMaskedConv(c_hidden)])
            self.conv_out = nn.Conv2d(c_hidden, c_in * 8, kernel_size=1, padding=0)
        def forward(self, x):
            x = (x.float() / 7.0) * 2 - 1
            v_stack = self.conv_vstack(x)
            h_stack = self.conv_hstack(x)
            for layer in self.conv_layers:
                v_stack, h_stack = layer(v_stack, h_stack)
            out = self.conv_out(F.elu(h_stack))
            out = out.reshape(out.shape[0], 8, out.shape[1] // 8, out.shape[2], out.shape[3])
            return out
        def calc_likelihood(self, x):
            pred = self.forward(x)
            nll = F.cross_entropy(pred, x, reduction='none')
            bpd = nll.mean(dim=[1, 2, 3]) * np.log2(np.exp(1))
            return bpd.mean()
        @torch.no_grad()
        def sample(self, img_shape, img=None):
            if img is None:
                img = torch.zeros(img_shape, dtype=torch.long) - 1
            for h in range(img_shape[2]):
                for w in range(img_shape[3]):
                    for c in range(img_shape[1]):
                        if (img[:, c, h, w] != -1).all().item():
                            continue
                        pred = self.forward(img[:, :, :h + 1, :])
                        probs = F.softmax(pred[:, :, c, h, w], dim=-1)
                        img[:, c, h, w] = torch.multinomial(probs, num_samples=1).squeeze(dim=-1)
            return img

    model = PixelCNN(c_in=1, c_hidden=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    def step(x):
        loss = model.calc_likelihood(x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    step = env.step(step)
    for i in range(3):
        env.rec(f"bpd {i}", step(torch.randint(0, 8, (2, 1, 6, 6))))
    env.rec("state", model.state_dict())
    # the receptive field: the gradient of one output pixel w.r.t. the input image
    inp_img = torch.zeros(1, 1, 6, 6)
    inp_img.requires_grad_()
    out = model(inp_img)
    out[0, :, 0, 3, 3].sum().backward()
    grad_map = inp_img.grad.abs().squeeze().numpy()
    env.rec("receptive", (grad_map > 1e-10).astype(np.int64))
    img = model.sample((2, 1, 3, 3))
    env.rec("sample", img)
    partial = torch.randint(0, 8, (1, 1, 3, 3))
    partial[:, :, 2:, :] = -1
    env.rec("autocomplete", model.sample(partial.shape, partial.clone()))


@pytest.mark.parametrize("program", [transformer_reverse, pixelcnn])
def test_uva(program):
    run_tutorial(program)
