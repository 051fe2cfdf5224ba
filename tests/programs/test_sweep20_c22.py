"""Sweep 20 (C), part 22: the neural style transfer tutorial. ContentLoss and StyleLoss
modules inserted after chosen convolutions of a feature network, each storing
`self.loss = F.mse_loss(...)` in forward and returning its input unchanged; the gram
matrix by features.view(a * b, c * d) and torch.mm(features, features.t()).div(a*b*c*d);
a Normalization module with mean/std viewed as (-1, 1, 1); the input image optimised with
optim.LBFGS([input_img.requires_grad_()]) whose closure clamps the image in place under
torch.no_grad, zeroes grads, runs the model, sums the modules' losses (read back from their
attributes) and returns them; the model's own parameters frozen (requires_grad_(False)).
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def style_transfer(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class ContentLoss(nn.Module):
        def __init__(self, target):
            super().__init__()
            self.target = target.detach()
            self.loss = None

        def forward(self, input):
            self.loss = F.mse_loss(input, self.target)
            return input

    def gram_matrix(input):
        a, b, c, d = input.size()
        features = input.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, input):
            self.loss = F.mse_loss(gram_matrix(input), self.target)
            return input

    class Normalization(nn.Module):
        def __init__(self, mean, std):
            super().__init__()
            self.mean = mean.clone().detach().view(-1, 1, 1)
            self.std = std.clone().detach().view(-1, 1, 1)

        def forward(self, img):
            return (img - self.mean) / self.std

    cnn = env.init(nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(inplace=False),
                                 nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(inplace=False),
                                 nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU()))
    cnn.eval().requires_grad_(False)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    style_img, content_img = env.rand(1, 3, 8, 8), env.rand(1, 3, 8, 8)

    def get_style_model_and_losses(content_layers=("conv_3",), style_layers=("conv_1", "conv_2", "conv_3")):
        model = nn.Sequential(Normalization(mean, std))
        content_losses, style_losses = [], []
        i = 0
        for layer in cnn.children():
            if isinstance(layer, nn.Conv2d):
                i += 1
                name = f"conv_{i}"
            elif isinstance(layer, nn.ReLU):
                name = f"relu_{i}"
                layer = nn.ReLU(inplace=False)
            else:
                name = f"pool_{i}"
            model.add_module(name, layer)
            if name in content_layers:
                target = model(content_img).detach()
                content_loss = ContentLoss(target)
                model.add_module(f"content_loss_{i}", content_loss)
                content_losses.append(content_loss)
            if name in style_layers:
                target_feature = model(style_img).detach()
                style_loss = StyleLoss(target_feature)
                model.add_module(f"style_loss_{i}", style_loss)
                style_losses.append(style_loss)
        return model, style_losses, content_losses

    model, style_losses, content_losses = get_style_model_and_losses()
    input_img = content_img.clone()
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = torch.optim.LBFGS([input_img], lr=0.5, max_iter=4)
    style_weight, content_weight = 1e4, 1.0
    history = []

    def closure():
        with torch.no_grad():
            input_img.clamp_(0, 1)
        optimizer.zero_grad()
        model(input_img)
        style_score = 0
        content_score = 0
        for sl in style_losses:
            style_score += sl.loss
        for cl in content_losses:
            content_score += cl.loss
        loss = style_weight * style_score + content_weight * content_score
        loss.backward()
        return loss
    closure = env.step(closure)
    for run in range(3):
        loss = optimizer.step(closure)
        history.append(loss.item())
        env.rec(f"losses{run}", ([sl.loss for sl in style_losses], content_losses[0].loss))
    with torch.no_grad():
        input_img.clamp_(0, 1)
    env.rec("history", history)
    env.rec("image", input_img)
    env.rec("lbfgs", optimizer.state_dict()["state"][0]["n_iter"])


def test_style_transfer():
    run_tutorial(style_transfer)
