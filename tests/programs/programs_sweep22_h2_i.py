"""Official tutorials and docs the other files leave out, nearly verbatim (sweep 22, H2 part
I): the "Audio Feature Extractions" tutorial's features written as torchaudio computes them
(Spectrogram by torch.stft with a Hann window and reflect padding, power 2; the HTK mel
filter bank; AmplitudeToDB with top_db; MFCC through the orthonormal DCT matrix; SpecAugment's
frequency and time masks; istft's round trip), then a small classifier trained on the log-mel
features with its step compiled; the "Complex Numbers" docs page (creation, view_as_real /
view_as_complex, real / imag views written in place, angle and abs, matmul, save / load, the
conjugate Wirtinger gradient, Adam / SGD on complex parameters), run eagerly: a compiled
function that meets a complex tensor runs eagerly by design (README, Known limits).
Synthetic waveforms. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def audio_features(torch, env):
    nn, F = torch.nn, torch.nn.functional
    sample_rate = 8000
    n_fft, hop_length, n_mels, n_mfcc = 128, 32, 16, 8

    def spectrogram(waveform, power=2.0):
        window = torch.hann_window(n_fft)
        shape = waveform.size()
        waveform = waveform.reshape(-1, shape[-1])
        spec_f = torch.stft(waveform, n_fft=n_fft, hop_length=hop_length, win_length=n_fft,
                            window=window, center=True, pad_mode="reflect", normalized=False,
                            onesided=True, return_complex=True)
        spec_f = spec_f.reshape(shape[:-1] + spec_f.shape[-2:])
        return spec_f.abs().pow(power)

    def _hz_to_mel(freq):
        return 2595.0 * math.log10(1.0 + (freq / 700.0))

    def _mel_to_hz(mels):
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)

    def melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate):
        # freq bins
        all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
        # calculate mel freq bins
        m_min = _hz_to_mel(f_min)
        m_max = _hz_to_mel(f_max)
        m_pts = torch.linspace(m_min, m_max, n_mels + 2)
        f_pts = _mel_to_hz(m_pts)
        # create filterbank
        f_diff = f_pts[1:] - f_pts[:-1]  # (n_filter + 1)
        slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)  # (n_freqs, n_filter + 2)
        zero = torch.zeros(1)
        down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]  # (n_freqs, n_filter)
        up_slopes = slopes[:, 2:] / f_diff[1:]  # (n_freqs, n_filter)
        fb = torch.max(zero, torch.min(down_slopes, up_slopes))
        return fb

    def amplitude_to_db(x, top_db=80.0):
        x_db = 10.0 * torch.log10(torch.clamp(x, min=1e-10))
        x_db -= 10.0 * math.log10(max(1e-10, 1.0))
        return torch.max(x_db, (x_db.amax(dim=(-2, -1)) - top_db)[..., None, None])

    def create_dct(n_mfcc, n_mels):
        n = torch.arange(float(n_mels))
        k = torch.arange(float(n_mfcc)).unsqueeze(1)
        dct = torch.cos(math.pi / float(n_mels) * (n + 0.5) * k)  # size (n_mfcc, n_mels)
        dct[0] *= 1.0 / math.sqrt(2.0)
        dct *= math.sqrt(2.0 / float(n_mels))
        return dct.t()

    t = torch.arange(2048) / sample_rate
    freqs = env.rand(6, 1) * 2000 + 200
    waveforms = torch.sin(2 * math.pi * freqs * t) + 0.05 * env.randn(6, 2048)
    labels = (freqs.squeeze(1) > 1200).long()

    spec = spectrogram(waveforms)
    env.rec("spectrogram", spec)
    fb = melscale_fbanks(n_fft // 2 + 1, 0.0, sample_rate / 2.0, n_mels, sample_rate)
    env.rec("fbanks", fb)
    mel = torch.matmul(spec.transpose(-1, -2), fb).transpose(-1, -2)
    mel_db = amplitude_to_db(mel)
    env.rec("mel dB", mel_db)
    mfcc = torch.matmul(mel_db.transpose(-1, -2), create_dct(n_mfcc, n_mels)).transpose(-1, -2)
    env.rec("mfcc", mfcc)

    # SpecAugment: a frequency mask and a time mask at given positions
    augmented = mel_db.clone()
    augmented[:, 3:6, :] = 0.0
    augmented[:, :, 10:14] = augmented.mean()
    env.rec("masked", augmented)

    window = torch.hann_window(n_fft)
    complex_spec = torch.stft(waveforms, n_fft, hop_length, window=window, return_complex=True)
    recon = torch.istft(complex_spec, n_fft, hop_length, window=window, length=2048)
    env.rec("istft error", (recon - waveforms).abs().max() < 1e-4)

    model = env.init(nn.Sequential(nn.Conv1d(n_mels, 8, 3, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    features = (augmented - augmented.mean()) / augmented.std()

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(step)
    for i in range(4):
        env.rec(f"loss {i}", step(features, labels))
    env.rec("state", model.state_dict())


def complex_numbers(torch, env):
    def real(t):    # (records of complex values, as real pairs: compared with tolerances)
        return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t

    x = torch.complex(env.randn(2, 2), env.randn(2, 2))
    env.rec("dtype", (x.dtype, torch.randn(2, 2, dtype=torch.cfloat).dtype,
                      torch.tensor([1 + 2j]).dtype, x.is_complex()))

    y = env.randn(3, 2)
    y_c = torch.view_as_complex(y)
    env.rec("view_as_complex", (torch.view_as_real(y_c), y_c.real, y_c.imag))
    y_c.real.mul_(2)        # (a view: writes y)
    env.rec("real written", y)
    env.rec("angle abs", (torch.angle(x), torch.abs(x), real(x.conj())))
    env.rec("matmul", real(torch.matmul(x, x)))
    path = env.path("complex_tensor.pt")
    torch.save(x, path)
    env.rec("loaded", real(torch.load(path)))

    # autograd: the conjugate Wirtinger derivative
    z = torch.complex(env.randn(4), env.randn(4)).requires_grad_()
    loss = (z * z.conj()).real.sum() + (z.abs() ** 3).sum() + torch.angle(z).sum()
    loss.backward()
    env.rec("grad", real(z.grad))

    # complex linear regression, the parameters complex, Adam and SGD with momentum
    inputs = torch.complex(env.randn(8, 3), env.randn(8, 3))
    true_w = torch.complex(env.randn(3), env.randn(3))
    target = inputs @ true_w
    for make in (lambda p: torch.optim.Adam(p, lr=0.05),
                 lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)):
        w = torch.zeros(3, dtype=torch.cfloat, requires_grad=True)
        opt = make([w])
        for i in range(5):
            opt.zero_grad()
            loss = (inputs @ w - target).abs().pow(2).mean()
            loss.backward()
            opt.step()
            env.rec(f"{type(opt).__name__} {i}", (loss.detach(), real(w.detach().clone())))
