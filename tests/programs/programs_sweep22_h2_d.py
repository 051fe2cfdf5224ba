"""Official tutorials and notes the other files leave out, nearly verbatim (sweep 22, H2
part D): "Writing Custom Datasets, DataLoaders and Transforms" (FaceLandmarksDataset over
in-memory images, the Rescale / RandomCrop / ToTensor callables composed, dict samples
collated by DataLoader(shuffle=True), a landmark regressor trained on the batches); the
2024 "NLP From Scratch: Classifying Names with a Character-Level RNN" (NamesDataset,
random_split with a seeded Generator, CharRNN on nn.RNN, per-name losses summed into a
batch, clip_grad_norm_, the confusion matrix); the "Reproducibility" note (seeds,
use_deterministic_algorithms, a DataLoader with worker_init_fn and its own Generator).
Names, images and landmarks are synthetic.
Programs `f(torch, env)`, see tutorial_harness.py."""
import random
import string

import numpy as np


class Compose:
    """torchvision.transforms.Compose (torchvision is not installed)."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


def _resize(image, shape):
    """skimage.transform.resize, nearest neighbour, to float64 in [0, 1] as skimage gives."""
    h, w = image.shape[:2]
    rows = (np.arange(shape[0]) * h / shape[0]).astype(int)
    cols = (np.arange(shape[1]) * w / shape[1]).astype(int)
    return image[rows][:, cols] / 255.0


def face_landmarks_dataset(torch, env):
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    nn = torch.nn

    gen = np.random.default_rng(7)
    frame = [(f"face{i}.jpg", gen.uniform(4, 20, size=(3, 2))) for i in range(10)]
    images = {name: gen.integers(0, 256, size=(24 + i % 3, 20, 3), dtype=np.uint8)
              for i, (name, _) in enumerate(frame)}

    class FaceLandmarksDataset(Dataset):
        """Face Landmarks dataset."""

        def __init__(self, landmarks_frame, transform=None):
            self.landmarks_frame = landmarks_frame
            self.transform = transform

        def __len__(self):
            return len(self.landmarks_frame)

        def __getitem__(self, idx):
            if torch.is_tensor(idx):
                idx = idx.tolist()

            img_name = self.landmarks_frame[idx][0]
            image = images[img_name]
            landmarks = self.landmarks_frame[idx][1]
            landmarks = np.array([landmarks], dtype=float).reshape(-1, 2)
            sample = {'image': image, 'landmarks': landmarks}

            if self.transform:
                sample = self.transform(sample)

            return sample

    class Rescale(object):
        def __init__(self, output_size):
            assert isinstance(output_size, (int, tuple))
            self.output_size = output_size

        def __call__(self, sample):
            image, landmarks = sample['image'], sample['landmarks']

            h, w = image.shape[:2]
            if isinstance(self.output_size, int):
                if h > w:
                    new_h, new_w = self.output_size * h / w, self.output_size
                else:
                    new_h, new_w = self.output_size, self.output_size * w / h
            else:
                new_h, new_w = self.output_size

            new_h, new_w = int(new_h), int(new_w)

            img = _resize(image, (new_h, new_w))

            # h and w are swapped for landmarks because for images,
            # x and y axes are axis 1 and 0 respectively
            landmarks = landmarks * [new_w / w, new_h / h]

            return {'image': img, 'landmarks': landmarks}

    class RandomCrop(object):
        def __init__(self, output_size):
            assert isinstance(output_size, (int, tuple))
            if isinstance(output_size, int):
                self.output_size = (output_size, output_size)
            else:
                assert len(output_size) == 2
                self.output_size = output_size

        def __call__(self, sample):
            image, landmarks = sample['image'], sample['landmarks']

            h, w = image.shape[:2]
            new_h, new_w = self.output_size

            top = np.random.randint(0, h - new_h + 1)
            left = np.random.randint(0, w - new_w + 1)

            image = image[top: top + new_h,
                          left: left + new_w]

            landmarks = landmarks - [left, top]

            return {'image': image, 'landmarks': landmarks}

    class ToTensor(object):
        """Convert ndarrays in sample to Tensors."""

        def __call__(self, sample):
            image, landmarks = sample['image'], sample['landmarks']

            # swap color axis because
            # numpy image: H x W x C
            # torch image: C x H x W
            image = image.transpose((2, 0, 1))
            return {'image': torch.from_numpy(image),
                    'landmarks': torch.from_numpy(landmarks)}

    np.random.seed(0)
    torch.manual_seed(0)
    face_dataset = FaceLandmarksDataset(frame)
    sample = face_dataset[torch.tensor(3)]
    env.rec("raw sample", (sample['image'].shape, sample['landmarks'].tolist()))

    transformed_dataset = FaceLandmarksDataset(
        frame, transform=Compose([Rescale(18), RandomCrop(16), ToTensor()]))
    dataloader = DataLoader(transformed_dataset, batch_size=4, shuffle=True, num_workers=0)

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(64, 6))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(image, landmarks):
        optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(model(image), landmarks.flatten(1))
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(step)
    for epoch in range(2):
        for i_batch, sample_batched in enumerate(dataloader):
            env.rec(f"batch {epoch}.{i_batch}", (tuple(sample_batched['image'].size()),
                                                  sample_batched['landmarks']))
            env.rec(f"loss {epoch}.{i_batch}", step(sample_batched['image'].float(),
                                                     sample_batched['landmarks'].float()))
    env.rec("state", model.state_dict())


def char_rnn_classification(torch, env):
    nn = torch.nn
    Dataset = torch.utils.data.Dataset

    allowed_characters = string.ascii_letters + " .,;'" + "_"
    n_letters = len(allowed_characters)

    def letterToIndex(letter):
        # return our out-of-vocabulary character if we encounter a letter unknown to our model
        if letter not in allowed_characters:
            return allowed_characters.find("_")
        else:
            return allowed_characters.find(letter)

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor

    gen = random.Random(3)
    files = {lang: ["".join(gen.choice(letters) for _ in range(gen.randint(3, 6))).title()
                    for _ in range(8)]
             for lang, letters in [("Czech", "cvzkrs"), ("Italian", "aeilot"),
                                   ("Japanese", "akimot"), ("Scottish", "cmnalo")]}

    class NamesDataset(Dataset):

        def __init__(self, files):
            self.load_time = 0
            labels_set = set()  # set of all classes

            self.data = []
            self.data_tensors = []
            self.labels = []
            self.labels_tensors = []

            # read all the ``.txt`` files in the specified directory
            for label, lines in sorted(files.items()):
                labels_set.add(label)
                for name in lines:
                    self.data.append(name)
                    self.data_tensors.append(lineToTensor(name))
                    self.labels.append(label)

            # Cache the tensor representation of the labels
            self.labels_uniq = sorted(labels_set)
            for idx in range(len(self.labels)):
                temp_tensor = torch.tensor([self.labels_uniq.index(self.labels[idx])],
                                           dtype=torch.long)
                self.labels_tensors.append(temp_tensor)

        def __len__(self):
            return len(self.data)

        def __getitem__(self, idx):
            data_item = self.data[idx]
            data_label = self.labels[idx]
            data_tensor = self.data_tensors[idx]
            label_tensor = self.labels_tensors[idx]

            return label_tensor, data_tensor, data_label, data_item

    alldata = NamesDataset(files)
    train_set, test_set = torch.utils.data.random_split(
        alldata, [.85, .15], generator=torch.Generator(device="cpu").manual_seed(2024))
    env.rec("split", (len(train_set), len(test_set), list(test_set.indices)))

    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super(CharRNN, self).__init__()

            self.rnn = nn.RNN(input_size, hidden_size)
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line_tensor):
            rnn_out, hidden = self.rnn(line_tensor)
            output = self.h2o(hidden[0])
            output = self.softmax(output)

            return output

    torch.manual_seed(0)
    n_hidden = 16
    rnn = CharRNN(n_letters, n_hidden, len(alldata.labels_uniq))

    def label_from_output(output, output_labels):
        top_n, top_i = output.topk(1)
        label_i = top_i[0].item()
        return output_labels[label_i], label_i

    criterion = nn.NLLLoss()

    def example_loss(text_tensor, label_tensor):
        output = rnn.forward(text_tensor)
        return criterion(output, label_tensor)

    example_loss = env.step(example_loss)

    def train(rnn, training_data, n_epoch=2, n_batch_size=8, learning_rate=0.2):
        current_loss = 0
        all_losses = []
        rnn.train()
        optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)
        shuffler = random.Random(0)
        for iter in range(1, n_epoch + 1):
            rnn.zero_grad()  # clear the gradients

            # create some minibatches
            # we cannot use dataloaders because each of our names is a different length
            batches = list(range(len(training_data)))
            shuffler.shuffle(batches)
            batches = np.array_split(batches, len(batches) // n_batch_size)

            for idx, batch in enumerate(batches):
                batch_loss = 0
                for i in batch:  # for each example in this batch
                    (label_tensor, text_tensor, label, text) = training_data[i]
                    loss = example_loss(text_tensor, label_tensor)
                    batch_loss += loss

                # optimize parameters
                batch_loss.backward()
                nn.utils.clip_grad_norm_(rnn.parameters(), 3)
                optimizer.step()
                optimizer.zero_grad()

                current_loss += batch_loss.item() / len(batch)

            all_losses.append(current_loss / len(batches))
            current_loss = 0
        return all_losses

    env.rec("losses", train(rnn, train_set))

    def evaluate(rnn, testing_data, classes):
        confusion = torch.zeros(len(classes), len(classes))
        rnn.eval()  # set to eval mode
        with torch.no_grad():  # do not record the gradients during eval phase
            for i in range(len(testing_data)):
                (label_tensor, text_tensor, label, text) = testing_data[i]
                output = rnn(text_tensor)
                guess, guess_i = label_from_output(output, classes)
                label_i = classes.index(label)
                confusion[label_i][guess_i] += 1

        # Normalize by dividing every row by its sum
        for i in range(len(classes)):
            denom = confusion[i].sum()
            if denom > 0:
                confusion[i] = confusion[i] / denom
        return confusion

    env.rec("confusion", evaluate(rnn, test_set, classes=alldata.labels_uniq))
    env.rec("state", rnn.state_dict())


def reproducibility(torch, env):
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

    def seed_worker(worker_id):
        worker_seed = torch.initial_seed() % 2**32
        np.random.seed(worker_seed)
        random.seed(worker_seed)

    class Noisy(TensorDataset):
        def __getitem__(self, i):       # (augmentation from NumPy's and Python's streams)
            x, y = super().__getitem__(i)
            return x + float(np.random.uniform(-0.1, 0.1)) * random.choice([1, -1]), y

    def run():
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        g = torch.Generator()
        g.manual_seed(0)
        data = Noisy(torch.randn(12, 5), torch.randint(0, 3, (12,)))
        loader = DataLoader(data, batch_size=4, shuffle=True, num_workers=0,
                            worker_init_fn=seed_worker, generator=g)
        model = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.2), nn.ReLU(), nn.Linear(8, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        step = env.step(step)
        losses = []
        for epoch in range(2):
            for x, y in loader:
                losses.append(step(x, y))
        return torch.stack(losses), model.state_dict(), torch.initial_seed()

    try:
        first = run()
        second = run()
        env.rec("deterministic", torch.are_deterministic_algorithms_enabled())
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(first[0], second[0])
    env.rec("losses", first[0])
    env.rec("state", first[1])
    env.rec("initial seed", first[2])

