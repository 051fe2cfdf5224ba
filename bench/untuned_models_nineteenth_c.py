"""untuned_models_nineteenth.py's SchNet: _schnet(lib, small) -> (model, optimiser, loss
closure) as the fifth set's training_step takes them."""
import numpy as np


def _schnet(lib, small):
    # (schnetpack/representation/schnet.py's SchNet and SchNetInteraction,
    # nn/radial.py's GaussianRBF, nn/cutoff.py's CosineCutoff, nn/activations.py's
    # shifted_softplus, nn/scatter.py's scatter_add, atomistic/response.py's forces by
    # autograd.grad; the pair list and positions' requires_grad as the transforms make them;
    # a toy pair potential's energies and forces as targets)
    nn, F = lib.nn, lib.nn.functional
    mols, atoms, n_basis, n_rbf, n_inter, cutoff = (2, 4, 8, 6, 1, 5.0) if small else (
        16, 12, 64, 20, 3, 5.0)

    def shifted_softplus(x):
        return F.softplus(x) - float(np.log(2.0))

    def scatter_add(x, idx_i, dim_size, dim=0):
        shape = list(x.shape)
        shape[dim] = dim_size
        tmp = lib.zeros(shape, dtype=x.dtype, device=x.device)
        return tmp.index_add(dim, idx_i, x)

    class GaussianRBF(nn.Module):
        def __init__(self, n_rbf, cutoff, start=0.0):
            super().__init__()
            offset = lib.linspace(start, cutoff, n_rbf)
            widths = lib.FloatTensor(lib.abs(offset[1] - offset[0]) * lib.ones_like(offset))
            self.register_buffer("widths", widths)
            self.register_buffer("offsets", offset)

        def forward(self, inputs):
            coeff = -0.5 / lib.pow(self.widths, 2)
            diff = inputs[..., None] - self.offsets
            return lib.exp(coeff * lib.pow(diff, 2))

    class CosineCutoff(nn.Module):
        def __init__(self, cutoff):
            super().__init__()
            self.register_buffer("cutoff", lib.FloatTensor([cutoff]))

        def forward(self, input):
            input_cut = 0.5 * (lib.cos(input * np.pi / self.cutoff) + 1.0)
            input_cut *= (input < self.cutoff).float()
            return input_cut

    class Dense(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, activation=None):
            super().__init__(in_features, out_features, bias)
            self.activation = activation if activation is not None else nn.Identity()

        def forward(self, input):
            return self.activation(F.linear(input, self.weight, self.bias))

    class SchNetInteraction(nn.Module):
        def __init__(self, n_atom_basis, n_rbf, n_filters, activation=shifted_softplus):
            super().__init__()
            self.in2f = Dense(n_atom_basis, n_filters, bias=False, activation=None)
            self.f2out = nn.Sequential(
                Dense(n_filters, n_atom_basis, activation=activation),
                Dense(n_atom_basis, n_atom_basis, activation=None))
            self.filter_network = nn.Sequential(
                Dense(n_rbf, n_filters, activation=activation), Dense(n_filters, n_filters))

        def forward(self, x, f_ij, idx_i, idx_j, rcut_ij):
            x = self.in2f(x)
            Wij = self.filter_network(f_ij)
            Wij = Wij * rcut_ij[:, None]
            x_j = x[idx_j]
            x_ij = x_j * Wij
            x = scatter_add(x_ij, idx_i, dim_size=x.shape[0])
            return self.f2out(x)

    class SchNet(nn.Module):
        def __init__(self, n_atom_basis, n_interactions, n_rbf, cutoff, max_z=100):
            super().__init__()
            self.radial_basis = GaussianRBF(n_rbf, cutoff)
            self.cutoff_fn = CosineCutoff(cutoff)
            self.embedding = nn.Embedding(max_z, n_atom_basis, padding_idx=0)
            self.interactions = nn.ModuleList(
                [SchNetInteraction(n_atom_basis, n_rbf, n_atom_basis)
                 for _ in range(n_interactions)])
            self.outnet = nn.Sequential(Dense(n_atom_basis, n_atom_basis // 2,
                                              activation=shifted_softplus),
                                        Dense(n_atom_basis // 2, 1))

        def forward(self, Z, R, idx_i, idx_j, idx_m, n_mols):
            r_ij = R[idx_j] - R[idx_i]
            d_ij = lib.norm(r_ij, dim=1)
            f_ij = self.radial_basis(d_ij)
            rcut_ij = self.cutoff_fn(d_ij)
            x = self.embedding(Z)
            for interaction in self.interactions:
                v = interaction(x, f_ij, idx_i, idx_j, rcut_ij)
                x = x + v
            yi = self.outnet(x)[:, 0]           # (Atomwise, aggregation "sum")
            return scatter_add(yi, idx_m, dim_size=n_mols)

    model = SchNet(n_basis, n_inter, n_rbf, cutoff)
    opt = lib.optim.AdamW(model.parameters(), lr=5e-4)
    rng = np.random.RandomState(1)
    R = rng.rand(mols, atoms, 3) * 4.0
    ii, jj = np.nonzero(~np.eye(atoms, dtype=bool))
    off = (np.arange(mols) * atoms)[:, None]
    d = np.linalg.norm(R[:, ii] - R[:, jj], axis=-1)                 # (mols, pairs)
    energy = np.exp(-d).sum(1) / 2
    g = (-np.exp(-d) / d)[..., None] * (R[:, ii] - R[:, jj])           # dE/dR_i per pair
    forces = np.zeros_like(R)
    for m in range(mols):
        np.add.at(forces[m], ii, -g[m])
    Z = lib.tensor(rng.choice([1, 6, 7, 8], mols * atoms))
    pos = lib.tensor(R.reshape(-1, 3).astype(np.float32))
    idx_i, idx_j = lib.tensor((ii[None] + off).ravel()), lib.tensor((jj[None] + off).ravel())
    idx_m = lib.tensor(np.repeat(np.arange(mols), atoms))
    E_ref = lib.tensor(energy.astype(np.float32))
    F_ref = lib.tensor(forces.reshape(-1, 3).astype(np.float32))
    rho = 0.1

    def loss():
        R = pos.clone().requires_grad_(True)
        E = model(Z, R, idx_i, idx_j, idx_m, mols)
        Fp = -lib.autograd.grad(E, R, grad_outputs=lib.ones_like(E), create_graph=True)[0]
        return rho * F.mse_loss(E, E_ref) + (1 - rho) * F.mse_loss(Fp, F_ref)
    return model, opt, loss
