#!/usr/bin/env python3
"""A small image classifier, for `make demo-profile` (CPU) and GPU nodes.

The dataset is synthetic: JPEG files written once (--make-data) into a
directory, so nothing is downloaded. Training reads them back through a
DataLoader whose workers decode each JPEG with Pillow and augment it (random
resized crop, flip, colour jitter, normalise) on the CPU, the way an
ImageNet-style input pipeline does. Both the workers and the model's own
threads come from the CPUs this process may run on, so the throughput
depends on the cores it is given: that is what lachesis-profiler measures.

Every --report-every seconds it prints a line such as
    step 120 loss 2.231 | 141.2 samples/s
whose number the profiler reads with --regex '([0-9.]+) samples/s'.
It runs until killed (the profiler's sweep stops it) or for --steps steps.

On a GPU node, --device cuda trains the model on the GPU (--arch resnet18 for
a model that gives the GPU real work) while the input pipeline stays on the
CPUs: the job Synergy is about, whose GPU waits for its share of cores.
"""

import argparse
import io
import os
import random
import sys
import time


def allowed_cpus():
    """The CPUs this process may run on (a Slurm job's or a sweep point's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def make_data(directory, count, size, classes, seed):
    """Writes count random JPEGs (size x size) in class subfolders."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for c in range(classes):
        os.makedirs(os.path.join(directory, str(c)), exist_ok=True)
    for i in range(count):
        c = i % classes
        # Smooth noise with a class-dependent tint, so the images are not
        # pure noise (JPEG of pure noise is unrealistically large) and the
        # labels are learnable.
        base = rng.integers(0, 256, size=(size // 8, size // 8, 3), dtype=np.uint8)
        img = Image.fromarray(base).resize((size, size), Image.BILINEAR)
        tint = Image.new("RGB", (size, size), ((c * 53) % 256, (c * 97) % 256, (c * 31) % 256))
        img = Image.blend(img, tint, 0.35)
        img.save(os.path.join(directory, str(c), f"{i:06d}.jpg"), quality=90)


def build(args):
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms
    from PIL import Image

    class JPEGFolder(Dataset):
        """Reads and decodes a JPEG per sample, in the DataLoader worker."""

        def __init__(self, root, transform):
            self.items = []
            for c in sorted(os.listdir(root), key=int):
                d = os.path.join(root, c)
                for f in sorted(os.listdir(d)):
                    self.items.append((os.path.join(d, f), int(c)))
            self.transform = transform

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            path, label = self.items[i]
            with open(path, "rb") as f:
                img = Image.open(io.BytesIO(f.read())).convert("RGB")
            return self.transform(img), label

    augment = transforms.Compose([
        transforms.RandomResizedCrop(args.crop, scale=(0.5, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.ColorJitter(0.3, 0.3, 0.3),
        transforms.ToTensor(),
        transforms.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
    ])
    data = JPEGFolder(args.data, augment)
    classes = len(os.listdir(args.data))

    if args.arch == "resnet18":
        from torchvision.models import resnet18
        model = resnet18(num_classes=classes)
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes),
        )
    return torch, data, model


def train(args):
    cpus = allowed_cpus()
    torch, data, model = build(args)
    device = torch.device(args.device)
    model = model.to(device)
    gpu = device.type == "cuda"
    # The model's threads and the input pipeline's workers share the CPUs
    # this process was given; more CPUs, more of both.
    torch.set_num_threads(cpus)
    workers = cpus if args.workers < 0 else args.workers
    loader = torch.utils.data.DataLoader(
        data, batch_size=args.batch, shuffle=True, num_workers=workers,
        drop_last=True, persistent_workers=workers > 0, pin_memory=gpu)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    print(f"training on {cpus} CPUs: {workers} loader workers, {torch.get_num_threads()} torch threads, "
          f"{len(data)} images, batch {args.batch}, {args.arch} on {device}", flush=True)

    step, since, seen = 0, time.monotonic(), 0
    while True:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            seen += len(y)
            now = time.monotonic()
            if now - since >= args.report_every:
                print(f"step {step} loss {loss.item():.3f} | {seen / (now - since):.1f} samples/s", flush=True)
                since, seen = now, 0
            if args.steps and step >= args.steps:
                return


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="directory of the synthetic JPEGs")
    p.add_argument("--make-data", action="store_true", help="write the synthetic dataset and exit")
    p.add_argument("--images", type=int, default=2048, help="images to write with --make-data")
    p.add_argument("--size", type=int, default=256, help="side of the written images")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--crop", type=int, default=128, help="side of the augmented crop the model sees")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=-1, help="DataLoader workers (-1: one per allowed CPU)")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: run until killed)")
    p.add_argument("--report-every", type=float, default=2.0, help="seconds between throughput lines")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="where the model trains: cpu, cuda, cuda:N")
    p.add_argument("--arch", choices=["small", "resnet18"], default="small", help="the model")
    args = p.parse_args()
    if args.make_data:
        make_data(args.data, args.images, args.size, args.classes, args.seed)
        print(f"wrote {args.images} JPEGs to {args.data}")
        return
    random.seed(args.seed)
    try:
        train(args)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
