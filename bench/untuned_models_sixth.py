"""Six more training steps for bench/untuned_models.py, written as their reference code and
tutorials write them and run before llgrad was tuned on any of them (2026-12-05): a
ResNet-18 for CIFAR at width 16 (BasicBlocks with 1x1-conv shortcuts; SGD with Nesterov
momentum, weight decay and OneCycleLR stepped each step), a char-RNN (Embedding, a 2-layer
nn.GRU with dropout, the hidden state made in the step; clip_grad_norm_), an attention
U-Net (attention gates, bilinear nn.Upsample, Dice+BCE loss), a Perceiver (latents
cross-attending to the inputs through nn.MultiheadAttention with kdim/vdim, then latent
self-attention), a physics-informed net for Burgers' equation (u_t, u_x, u_xx by
autograd.grad(create_graph=True) inside the loss) and a triplet Siamese net (PReLU conv
embedding, TripletMarginLoss).
build(lib, name) -> (model, step) as in untuned_models_fifth.py (its training_step); the
last three models are in untuned_models_sixth_b.py."""
import untuned_models_sixth_b
from untuned_models_fifth import training_step

NAMES = ("resnet18", "chargru", "attunet", "perceiver", "pinn", "siamese")


def build(lib, name):
    return training_step(lib, getattr(untuned_models_sixth_b, "_" + name, None) or
                         globals()["_" + name])


def _resnet18(lib):
    # (kuangliu/pytorch-cifar's resnet.py, ResNet18 with the widths 64..512 cut to 16..128,
    # and its main.py's SGD; OneCycleLR as the super-convergence recipes step it per batch)
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super(BasicBlock, self).__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != self.expansion * planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(self.expansion * planes))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            out = F.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, block, num_blocks, num_classes=10, width=16):
            super(ResNet, self).__init__()
            self.in_planes = width
            self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
            self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
            self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
            self.layer4 = self._make_layer(block, 8 * width, num_blocks[3], stride=2)
            self.linear = nn.Linear(8 * width * block.expansion, num_classes)

        def _make_layer(self, block, planes, num_blocks, stride):
            strides = [stride] + [1] * (num_blocks - 1)
            layers = []
            for stride in strides:
                layers.append(block(self.in_planes, planes, stride))
                self.in_planes = planes * block.expansion
            return nn.Sequential(*layers)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer1(out)
            out = self.layer2(out)
            out = self.layer3(out)
            out = self.layer4(out)
            out = F.avg_pool2d(out, 4)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
            return out

    m = ResNet(BasicBlock, [2, 2, 2, 2])
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=200)
    criterion = nn.CrossEntropyLoss()
    x, y = lib.randn(8, 3, 32, 32), lib.randint(0, 10, (8,))
    return m, opt, lambda: criterion(m(x), y), {"scheduler": sched}


def _chargru(lib):
    # (spro/char-rnn.pytorch's CharRNN, run over whole batch_first chunks as its "gru"
    # model with batched input; the hidden state initialised each step as its train() does)
    nn, F = lib.nn, lib.nn.functional
    n_characters, chunk_len, batch_size = 100, 64, 16

    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size, model="gru", n_layers=2, dropout=0.2):
            super(CharRNN, self).__init__()
            self.model = model.lower()
            self.input_size = input_size
            self.hidden_size = hidden_size
            self.output_size = output_size
            self.n_layers = n_layers
            self.encoder = nn.Embedding(input_size, hidden_size)
            self.rnn = nn.GRU(hidden_size, hidden_size, n_layers, dropout=dropout, batch_first=True)
            self.decoder = nn.Linear(hidden_size, output_size)

        def forward(self, input, hidden):
            encoded = self.encoder(input)
            output, hidden = self.rnn(encoded, hidden)
            output = self.decoder(output.reshape(-1, self.hidden_size))
            return output, hidden

        def init_hidden(self, batch_size):
            return lib.zeros(self.n_layers, batch_size, self.hidden_size)

    m = CharRNN(n_characters, 128, n_characters)
    opt = lib.optim.Adam(m.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    text = lib.randint(0, n_characters, (batch_size, chunk_len + 1))
    inp, target = text[:, :-1], text[:, 1:]

    def loss():
        hidden = m.init_hidden(batch_size)
        output, hidden = m(inp, hidden)
        return criterion(output, target.reshape(-1))
    return m, opt, loss, {"clip": 5.0}


def _attunet(lib):
    # (LeeJunHyun/Image_Segmentation's AttU_Net at widths 8..64 and one level fewer, its
    # up_conv upsampling bilinearly as milesial/Pytorch-UNet's does; the Kaggle DiceBCELoss)
    nn, F = lib.nn, lib.nn.functional

    class conv_block(nn.Module):
        def __init__(self, ch_in, ch_out):
            super(conv_block, self).__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(ch_in, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
                nn.BatchNorm2d(ch_out), nn.ReLU(inplace=True),
                nn.Conv2d(ch_out, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
                nn.BatchNorm2d(ch_out), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.conv(x)

    class up_conv(nn.Module):
        def __init__(self, ch_in, ch_out):
            super(up_conv, self).__init__()
            self.up = nn.Sequential(
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
                nn.Conv2d(ch_in, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
                nn.BatchNorm2d(ch_out), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.up(x)

    class Attention_block(nn.Module):
        def __init__(self, F_g, F_l, F_int):
            super(Attention_block, self).__init__()
            self.W_g = nn.Sequential(nn.Conv2d(F_g, F_int, kernel_size=1, stride=1, padding=0, bias=True),
                                     nn.BatchNorm2d(F_int))
            self.W_x = nn.Sequential(nn.Conv2d(F_l, F_int, kernel_size=1, stride=1, padding=0, bias=True),
                                     nn.BatchNorm2d(F_int))
            self.psi = nn.Sequential(nn.Conv2d(F_int, 1, kernel_size=1, stride=1, padding=0, bias=True),
                                     nn.BatchNorm2d(1), nn.Sigmoid())
            self.relu = nn.ReLU(inplace=True)

        def forward(self, g, x):
            g1 = self.W_g(g)
            x1 = self.W_x(x)
            psi = self.relu(g1 + x1)
            psi = self.psi(psi)
            return x * psi

    class AttU_Net(nn.Module):
        def __init__(self, img_ch=1, output_ch=1, w=8):
            super(AttU_Net, self).__init__()
            self.Maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.Conv1 = conv_block(img_ch, w)
            self.Conv2 = conv_block(w, 2 * w)
            self.Conv3 = conv_block(2 * w, 4 * w)
            self.Conv4 = conv_block(4 * w, 8 * w)
            self.Up4 = up_conv(8 * w, 4 * w)
            self.Att4 = Attention_block(F_g=4 * w, F_l=4 * w, F_int=2 * w)
            self.Up_conv4 = conv_block(8 * w, 4 * w)
            self.Up3 = up_conv(4 * w, 2 * w)
            self.Att3 = Attention_block(F_g=2 * w, F_l=2 * w, F_int=w)
            self.Up_conv3 = conv_block(4 * w, 2 * w)
            self.Up2 = up_conv(2 * w, w)
            self.Att2 = Attention_block(F_g=w, F_l=w, F_int=w // 2)
            self.Up_conv2 = conv_block(2 * w, w)
            self.Conv_1x1 = nn.Conv2d(w, output_ch, kernel_size=1, stride=1, padding=0)

        def forward(self, x):
            x1 = self.Conv1(x)
            x2 = self.Conv2(self.Maxpool(x1))
            x3 = self.Conv3(self.Maxpool(x2))
            x4 = self.Conv4(self.Maxpool(x3))
            d4 = self.Up4(x4)
            x3 = self.Att4(g=d4, x=x3)
            d4 = self.Up_conv4(lib.cat((x3, d4), dim=1))
            d3 = self.Up3(d4)
            x2 = self.Att3(g=d3, x=x2)
            d3 = self.Up_conv3(lib.cat((x2, d3), dim=1))
            d2 = self.Up2(d3)
            x1 = self.Att2(g=d2, x=x1)
            d2 = self.Up_conv2(lib.cat((x1, d2), dim=1))
            return self.Conv_1x1(d2)

    class DiceBCELoss(nn.Module):
        def __init__(self, weight=None, size_average=True):
            super(DiceBCELoss, self).__init__()

        def forward(self, inputs, targets, smooth=1):
            inputs = lib.sigmoid(inputs)
            inputs = inputs.view(-1)
            targets = targets.view(-1)
            intersection = (inputs * targets).sum()
            dice_loss = 1 - (2. * intersection + smooth) / (inputs.sum() + targets.sum() + smooth)
            BCE = F.binary_cross_entropy(inputs, targets, reduction="mean")
            return BCE + dice_loss

    m = AttU_Net()
    opt = lib.optim.Adam(m.parameters(), lr=1e-3)
    criterion = DiceBCELoss()
    x = lib.randn(4, 1, 48, 48)
    mask = (lib.rand(4, 1, 48, 48) > 0.5).to(x.dtype)     # (a loader's float mask)
    return m, opt, lambda: criterion(m(x), mask)
