"""Official tutorials the other files leave out, nearly verbatim (sweep 21b, E): "Introduction
to torch.compile" (a compiled function, decorator, nested call, nn.Module.compile and
torch.compile(module), a function with a tensor `if`, torch._dynamo.explain, fullgraph, a
compiled training step); the YouTube series' "Building models with PyTorch" (TinyModel,
LeNet, LSTMTagger, the layer zoo). In the first, the torch run uses torch.compile's "eager"
backend (inductor would build C++ for minutes on this machine); the llgrad runs,
llgrad.compile's default. Programs `f(torch, env)`, see tutorial_harness.py."""


def torch_compile_intro(torch, env):
    opts = {"backend": "eager"} if torch.__name__ == "torch" else {}

    def foo(x, y):
        a = torch.sin(x)
        b = torch.cos(y)
        return a + b

    opt_foo1 = torch.compile(foo, **opts)
    x, y = env.randn(3, 3), env.randn(3, 3)
    env.rec("opt_foo1", opt_foo1(x, y))
    env.rec("foo", foo(x, y))

    @torch.compile(**opts)
    def opt_foo2(x, y):
        a = torch.sin(x)
        b = torch.cos(y)
        return a + b

    env.rec("opt_foo2", opt_foo2(x, y))

    def inner(x):
        return torch.sin(x)

    @torch.compile(**opts)
    def outer(x, y):
        a = inner(x)
        b = torch.cos(y)
        return a + b

    env.rec("outer", outer(x, y))

    class MyModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return torch.nn.functional.relu(self.lin(x))

    mod1 = env.init(MyModule())
    mod1.compile(**opts)
    env.rec("mod1", mod1(x))
    mod2 = env.init(MyModule())
    mod2 = torch.compile(mod2, **opts)
    env.rec("mod2", mod2(x))
    # (torch's OptimizedModule prefixes keys with '_orig_mod.', llgrad's by design not:
    # tests/nn/test_api_sweep11.py; programs strip it)
    env.rec("mod2 state_dict keys", sorted(k.replace("_orig_mod.", "")
                                           for k in mod2.state_dict().keys()))

    def bar(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    opt_bar = torch.compile(bar, **opts)
    inp1 = torch.ones(10)
    inp2 = torch.ones(10)
    env.rec("bar +", opt_bar(inp1, inp2))
    env.rec("bar -", opt_bar(inp1, -inp2))
    a, b = env.randn(10), env.randn(10)
    env.rec("bar random", (opt_bar(a, b), bar(a, b)))

    explanation = torch._dynamo.explain(bar)(a, b)
    env.rec("explain", (explanation.graph_count >= 1, isinstance(str(explanation), str)))

    opt_bar_fullgraph = torch.compile(bar, fullgraph=True, **opts)
    try:
        env.rec("fullgraph", opt_bar_fullgraph(a, b), cross=False)
    except Exception as e:
        env.rec("fullgraph", type(e).__name__, cross=False)

    model = env.init(MyModule())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(mod, data):
        opt.zero_grad(True)
        pred = mod(data[0])
        loss = loss_fn(pred, data[1])
        loss.backward()
        opt.step()
        return loss

    train = env.step(train)
    for i in range(4):
        data = (env.randn(8, 3), env.randint(0, 3, (8,)))
        env.rec(f"train {i}", train(model, data))
    env.rec("trained", list(model.parameters()))
    model.eval()
    with torch.no_grad():
        env.rec("eval", torch.compile(model, **opts)(x))


def building_models(torch, env):
    F = torch.nn.functional

    class TinyModel(torch.nn.Module):
        def __init__(self):
            super(TinyModel, self).__init__()
            self.linear1 = torch.nn.Linear(100, 200)
            self.activation = torch.nn.ReLU()
            self.linear2 = torch.nn.Linear(200, 10)
            self.softmax = torch.nn.Softmax()

        def forward(self, x):
            x = self.linear1(x)
            x = self.activation(x)
            x = self.linear2(x)
            x = self.softmax(x)
            return x

    tinymodel = env.init(TinyModel())
    env.rec("tiny repr", repr(tinymodel))
    env.rec("tiny params", [tuple(p.shape) for p in tinymodel.parameters()])
    env.rec("linear2 repr", repr(tinymodel.linear2))
    env.rec("tiny out", tinymodel(env.rand(100)))

    lin = env.init(torch.nn.Linear(3, 2))
    x = env.rand(1, 3)
    env.rec("lin weight", [p for p in lin.parameters()])
    env.rec("lin out", lin(x))

    class LeNet(torch.nn.Module):
        def __init__(self):
            super(LeNet, self).__init__()
            self.conv1 = torch.nn.Conv2d(1, 6, 5)
            self.conv2 = torch.nn.Conv2d(6, 16, 3)
            self.fc1 = torch.nn.Linear(16 * 6 * 6, 120)
            self.fc2 = torch.nn.Linear(120, 84)
            self.fc3 = torch.nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, self.num_flat_features(x))
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

        def num_flat_features(self, x):
            size = x.size()[1:]  # all dimensions except the batch dimension
            num_features = 1
            for s in size:
                num_features *= s
            return num_features

    lenet = env.init(LeNet())
    env.rec("lenet", lenet(env.rand(2, 1, 32, 32)))

    class LSTMTagger(torch.nn.Module):
        def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
            super(LSTMTagger, self).__init__()
            self.hidden_dim = hidden_dim
            self.word_embeddings = torch.nn.Embedding(vocab_size, embedding_dim)
            self.lstm = torch.nn.LSTM(embedding_dim, hidden_dim)
            self.hidden2tag = torch.nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentence):
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
            tag_scores = F.log_softmax(tag_space, dim=1)
            return tag_scores

    tagger = env.init(LSTMTagger(6, 5, 9, 3))
    env.rec("tagger", tagger(env.randint(0, 9, (4,))))

    my_tensor = env.rand(1, 6, 6)
    maxpool_layer = torch.nn.MaxPool2d(3)
    env.rec("maxpool", maxpool_layer(my_tensor))

    my_tensor = env.rand(1, 4, 4) * 20 + 5
    env.rec("mean", my_tensor.mean())
    conv_layer = env.init(torch.nn.Conv1d(4, 4, 3))
    norm_layer = torch.nn.BatchNorm1d(4)
    dummy_output = conv_layer(my_tensor)
    normed_tensor = norm_layer(dummy_output)
    env.rec("normed", normed_tensor)
    env.rec("normed mean", normed_tensor.mean())
    env.rec("running", (norm_layer.running_mean, norm_layer.running_var))

    my_tensor = env.rand(1, 4, 4)
    dropout = torch.nn.Dropout(p=0.4)
    env.rec("dropout", dropout(my_tensor), cross=False)

    # (a training step over the TinyModel, its Softmax's implicit dim included)
    opt = torch.optim.SGD(tinymodel.parameters(), lr=0.1)
    xs, ys = env.rand(8, 100), env.randint(0, 10, (8,))

    def step(x, y):
        opt.zero_grad()
        loss = F.nll_loss(torch.log(tinymodel(x)), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    for i in range(3):
        env.rec(f"tiny loss {i}", step(xs, ys))
