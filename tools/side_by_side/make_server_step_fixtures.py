#!/usr/bin/env python3
"""Fixtures that put fedkit's FedExP and MA-Echo server steps side by side with the
official code's, on identical client models.

The official repositories are run from a checkout (never copied into fedkit):
their modules are imported from --official, and only what cannot run here is
patched at run time: CUDA calls become CPU calls, the data set and the model
constructors the scripts ask for are replaced by a tiny seeded problem (the
server steps are what is compared), and MA-Echo's two unused imports (tqdm, a
progress bar, and cvxopt, whose only caller is commented out) get stubs when they
are not installed. What the official server steps compute is read out of their
frames with sys.settrace, without changing a line of theirs.

Regenerate (from the repository root; the checkouts are the official repositories
at Divyansh03/FedExP 34b05a2 and FudanVI/MAEcho b7d9270):

  python3 tools/side_by_side/make_server_step_fixtures.py --method=fedexp \
      --official=/path/to/FedExP --out=aggregators/fedexp/testdata
  python3 tools/side_by_side/make_server_step_fixtures.py --method=maecho \
      --official=/path/to/MAEcho --out=aggregators/maecho/testdata

Each run writes <out>/official_<method>.pt (torch.save of a dict name -> tensor,
read by the C++ tests with torch::pickle_load) and <out>/official_<method>.txt
(one "name value" line per scalar, values printed with 17 significant digits).
Reruns write identical files: everything is seeded and runs on one CPU thread.
"""

import argparse
import copy
import os
import runpy
import sys
import tempfile
import types

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_cpu  # pylint: disable=wrong-import-position


def write_fixture(out, name, tensors, scalars):
    os.makedirs(out, exist_ok=True)
    tensors = {k: v.detach().clone().contiguous() for k, v in tensors.items()}
    torch.save(tensors, os.path.join(out, f'official_{name}.pt'))
    with open(os.path.join(out, f'official_{name}.txt'), 'w') as f:
        for key, value in scalars.items():
            f.write(f'{key} {float(value):.17g}\n')
    print(f'wrote {len(tensors)} tensors and {len(scalars)} scalars to {out}/official_{name}.*')


# ---------------------------------------------------------------------------- FedExP

class FedExpMlp(nn.Module):
    """fedkit's model "mlp" with hidden: [3] on 4 inputs and 3 classes: the same names."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 3))

    def forward(self, x):
        return self.layers(x.flatten(1))


def fedexp_clients(generator):
    """Five clients of unequal size (so data-size weights matter), each nearly all one
    class and with inputs that do not separate the classes: their updates pull apart
    round after round, so the server step extrapolates (eta_g > 1)."""
    clients = []
    for i, size in enumerate([30, 45, 60, 75, 90]):
        labels = torch.where(torch.rand(size, generator=generator) < 0.9,
                             torch.full((size,), i % 3),
                             torch.randint(0, 3, (size,), generator=generator))
        x = 3.0 * torch.randn(size, 4, generator=generator)
        clients.append(torch.utils.data.TensorDataset(x, labels))
    return clients


def run_fedexp(official, out):
    """main.py, unchanged, for 4 rounds (t = 0..3) of 'fedexp' with its EMNIST constants.

    EMNIST because its branch has no image augmentation (the CIFAR branches crop
    32x32 images); its constants are the code's: local lr 0.1 decayed by 0.998 per
    round (before the first), eps 0.1 decayed by 0.998^2, 20 local steps of batch
    50, weight decay 1e-4, clipping at 10. 3 of 5 clients per round.
    """
    sys.path.insert(0, official)
    official_cpu.patch_cuda_to_cpu()
    import util_data
    import util_general
    import util_models

    generator = torch.Generator().manual_seed(34)
    clients = fedexp_clients(generator)
    test = torch.utils.data.TensorDataset(torch.randn(20, 4, generator=generator),
                                          torch.randint(0, 3, (20,), generator=generator))
    util_data.get_dataset = lambda *args, **kwargs: (clients, test)
    util_models.get_model = lambda *args, **kwargs: FedExpMlp()

    names = [name for name, _ in FedExpMlp().named_parameters()]
    shapes = [p.shape for p in FedExpMlp().parameters()]

    def split(vector):
        tensors, offset = {}, 0
        for name, shape in zip(names, shapes):
            tensors[name] = vector[offset:offset + shape.numel()].view(shape)
            offset += shape.numel()
        return tensors

    tensors, scalars = {}, {}
    calls = []
    get_grad = util_general.get_grad

    def recording_get_grad(net, args, hyper, dataset, alg, idx, mem_mat, c):
        grad = get_grad(net, args, hyper, dataset, alg, idx, mem_mat, c)
        calls.append((torch.nn.utils.parameters_to_vector(net.parameters()).detach().clone(),
                      int(idx), len(dataset), grad.detach().clone()))
        return grad

    util_general.get_grad = recording_get_grad

    main = os.path.join(official, 'main.py')
    step_line = official_cpu.line_of(main, 'eta_g_tmp.append(eta_g)')
    set_line = official_cpu.line_of(main, 'vector_to_parameters(w_vec_estimate,net_glob.parameters())')
    rounds = []

    def local_trace(frame, event, arg):
        if event != 'line':
            return local_trace
        g = frame.f_globals
        if frame.f_lineno == step_line:
            # This round's server step, as the code computed it.
            rounds.append({
                'eta_g': float(g['eta_g']),
                'epsilon': float(g['epsilon']),
                'mean_sq_norm': float(g['grad_norm_avg']),
                'mean_update_sq_norm': float(g['grad_avg_norm']),
                'participants': int(g['S']),
            })
        elif frame.f_lineno == set_line:
            rounds[-1]['next'] = g['w_vec_estimate'].detach().clone()
            rounds[-1]['evaluated'] = g['w_vec_avg'].detach().clone()
        return local_trace

    def global_trace(frame, event, arg):
        if frame.f_code.co_filename == main and frame.f_code.co_name == '<module>':
            return local_trace
        return None

    argv, cwd = sys.argv, os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:  # main.py writes its results into the cwd
        os.chdir(scratch)
        sys.argv = ['main.py', '--seed', '1', '--algorithm', 'fedexp', '--dataset', 'EMNIST',
                    '--model', 'mlp', '--num_clients', '5', '--num_participating_clients', '3',
                    '--num_rounds', '3', '--alpha', '0.3']
        sys.settrace(global_trace)
        try:
            # Another run_name than __main__ keeps this script's classes picklable.
            runpy.run_path(main, run_name='fedexp_main')
        finally:
            sys.settrace(None)
            sys.argv = argv
            os.chdir(cwd)

    assert len(calls) == 3 * len(rounds), (len(calls), len(rounds))
    scalars['rounds'] = len(rounds)
    scalars['epsilon_0'] = 0.1
    scalars['epsilon_decay'] = 0.998
    for t, step in enumerate(rounds):
        prefix = f'round{t + 1}/'  # fedkit counts rounds from 1
        round_calls = calls[3 * t:3 * t + 3]
        for name, value in split(round_calls[0][0]).items():
            tensors[prefix + 'global/' + name] = value
        for k, (start, idx, size, grad) in enumerate(round_calls):
            assert torch.equal(start, round_calls[0][0])
            for name, value in split(grad).items():
                tensors[f'{prefix}client{k}/delta/{name}'] = value
            scalars[f'{prefix}client{k}/id'] = idx
            scalars[f'{prefix}client{k}/num_examples'] = size
        for name, value in split(step['next']).items():
            tensors[prefix + 'next/' + name] = value
        for name, value in split(step['evaluated']).items():
            tensors[prefix + 'evaluated/' + name] = value
        for key in ('eta_g', 'epsilon', 'mean_sq_norm', 'mean_update_sq_norm', 'participants'):
            scalars[prefix + key] = step[key]
    write_fixture(out, 'fedexp', tensors, scalars)


# ---------------------------------------------------------------------------- MA-Echo

class MaEchoMlp(nn.Module):
    """The code's bias-free 'mnistnet' shrunk to 6-5-4-3-10 (the code hard-codes
    'fc4.weight' as the classifier and 10 classes): fedkit's "mlp" with hidden:
    [5, 4, 3] and bias: false, whose weights are layers.0/2/4/6.weight. forward
    returns the logits and each layer's batch-mean input, as the code's models do."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 5, bias=False)
        self.fc2 = nn.Linear(5, 4, bias=False)
        self.fc3 = nn.Linear(4, 3, bias=False)
        self.fc4 = nn.Linear(3, 10, bias=False)

    def forward(self, x):
        h_list = []
        x = x.view(-1, 6)
        for layer in (self.fc1, self.fc2, self.fc3):
            h_list.append(torch.mean(x, 0, True))
            x = torch.relu(layer(x))
        h_list.append(torch.mean(x, 0, True))
        return self.fc4(x), h_list


MAECHO_NAMES = {'fc1.weight': 'layers.0.weight', 'fc2.weight': 'layers.2.weight',
                'fc3.weight': 'layers.4.weight', 'fc4.weight': 'layers.6.weight'}


def run_maecho(official, out):
    """The code's client training (trainmodel.Appr), projections (utils.createp) and
    aggregation (utils.noniid_aggr), unchanged, on 3 clients of a tiny label-skewed
    problem; noniid_aggr's anchor W and client models V_i are read out of its frame
    at every pass of its iteration loop. Two runs: the code's MNIST setting (step
    1.6, no row normalisation) and its CIFAR one (step 0.05, --norm on)."""
    sys.path.insert(0, official)
    official_cpu.patch_cuda_to_cpu()
    official_cpu.stub_maecho_imports()
    import trainmodel
    import utils

    torch.manual_seed(34)
    generator = torch.Generator().manual_seed(34)
    means = 2.0 * torch.randn(10, 6, generator=generator)
    # Client 0 holds classes 0-3, client 1 classes 3-6, client 2 classes 6-8 and one
    # example of 9 (one is not enough: the code drops classes with a single example);
    # nobody holds class 9 then, whose classifier row the code leaves at zero.
    class_lists = [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8]]
    sizes = [70, 90, 50]
    loaders, splits, counts, rows = [], [], [], []
    for classes, size in zip(class_lists, sizes):
        labels = torch.tensor(classes)[torch.randint(0, len(classes), (size,), generator=generator)]
        if classes == [6, 7, 8]:
            labels[-1] = 9
        x = means[labels] + torch.randn(size, 6, generator=generator)
        data = torch.utils.data.TensorDataset(x, labels)
        # batch_size 16: several rank-1 projector updates per layer from a few examples.
        loaders.append(torch.utils.data.DataLoader(data, batch_size=16, shuffle=False))
        count = torch.bincount(labels, minlength=10)
        counts.append(count)
        splits.append([c for c in range(10) if count[c] > 1])  # noniid.py's rule
    test = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(32, 6, generator=generator),
                                       torch.randint(0, 10, (32,), generator=generator)),
        batch_size=16)

    # --diff_init True: every client its own initialisation; the code's local training.
    train_args = types.SimpleNamespace(num_epochs=3, batch_size=16, learning_rate=0.05, gpu_id=0)
    models = []
    for _ in class_lists:
        model = MaEchoMlp()
        trainmodel.Appr(model, args=train_args).train(loaders[len(models)])
        models.append(model)

    # The layer inputs createp sees, in its order (the loaders do not shuffle).
    for model, loader in zip(models, loaders):
        model.eval()
        with torch.no_grad():
            per_layer = [[] for _ in range(3)]
            for x, _ in loader:
                _, h_list = model(x)
                for layer in range(3):
                    per_layer[layer].append(h_list[layer])
        rows.append([torch.cat(r) for r in per_layer])

    base = dict(model_type='mlpnet', C=0.5, batch_size=16, gpu_id=0, split=True, test=False,
                n_nets=len(models))
    pps = [utils.createp(model, loader, args=types.SimpleNamespace(**base))
           for model, loader in zip(models, loaders)]

    aggr = utils.noniid_aggr.__code__
    loop_line = official_cpu.line_of(utils.__file__, 'for numm in tqdm(range(args.maxt_times)):')

    def aggregate(iterations, step, norm):
        snapshots = []

        def local_trace(frame, event, arg):
            if event == 'line' and frame.f_lineno == loop_line:
                f = frame.f_locals
                snapshots.append(({k: v.clone() for k, v in f['wout'].items()},
                                  [{k: v.clone() for k, v in w.items()} for w in f['w']]))
            return local_trace

        def global_trace(frame, event, arg):
            return local_trace if frame.f_code is aggr else None

        args = types.SimpleNamespace(maxt_times=iterations, lambdastep=step, norm=norm, **base)
        sys.settrace(global_trace)
        try:
            utils.noniid_aggr(copy.deepcopy(models), pps, test, splits=splits, args=args)
        finally:
            sys.settrace(None)
        # The loop header runs once before every iteration and once to leave the loop.
        assert len(snapshots) == iterations + 1, len(snapshots)
        return snapshots

    tensors, scalars = {}, {}
    global_model = MaEchoMlp()  # the server's model: deltas are taken from it
    for name, value in global_model.state_dict().items():
        tensors['global/' + MAECHO_NAMES[name]] = value
    for i, model in enumerate(models):
        for name, value in model.state_dict().items():
            tensors[f'client{i}/model/{MAECHO_NAMES[name]}'] = value
        for layer, name in enumerate(['fc1.weight', 'fc2.weight', 'fc3.weight']):
            tensors[f'client{i}/P/{MAECHO_NAMES[name]}'] = pps[i][name]
            tensors[f'client{i}/rows/{MAECHO_NAMES[name]}'] = rows[i][layer]
        tensors[f'client{i}/class_counts'] = counts[i]
    scalars['clients'] = len(models)
    scalars['shrink'] = 0.5
    scalars['linear_regularizer'] = 0.01 ** 0.8
    runs = {'code_mnist': (6, 1.6, False), 'code_cifar_norm': (6, 0.05, True)}
    for run, (iterations, step, norm) in runs.items():
        scalars[f'{run}/iterations'] = iterations
        scalars[f'{run}/step'] = step
        scalars[f'{run}/normalize_rows'] = int(norm)
        for t, (anchor, clients) in enumerate(aggregate(iterations, step, norm)):
            # The code's output after t iterations: the split average of the V_i.
            output = utils.noniid_avgmodel(copy.deepcopy(clients), splits, True)
            for name in ['fc1.weight', 'fc2.weight', 'fc3.weight', 'fc4.weight']:
                tensors[f'{run}/iter{t}/anchor/{MAECHO_NAMES[name]}'] = anchor[name]
                tensors[f'{run}/iter{t}/output/{MAECHO_NAMES[name]}'] = output[name]
    write_fixture(out, 'maecho', tensors, scalars)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--method', choices=['fedexp', 'maecho'], required=True)
    parser.add_argument('--official', required=True, help='checkout of the official repository')
    parser.add_argument('--out', required=True, help='folder for the fixture files')
    flags = parser.parse_args()
    torch.set_num_threads(1)
    out = os.path.abspath(flags.out)
    official = os.path.abspath(flags.official)
    if flags.method == 'fedexp':
        run_fedexp(official, out)
    else:
        run_maecho(official, out)


if __name__ == '__main__':
    main()
