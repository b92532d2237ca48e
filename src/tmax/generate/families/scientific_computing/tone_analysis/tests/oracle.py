import math
import struct
import wave


def load_samples(path):
    """(rate, samples) from a 16-bit mono WAV or a text file 'rate N' + one sample a line."""
    if path.endswith(".wav"):
        with wave.open(path, "rb") as handle:
            rate, frames = handle.getframerate(), handle.readframes(handle.getnframes())
        return rate, list(struct.unpack("<%dh" % (len(frames) // 2), frames))
    with open(path) as handle:
        lines = handle.read().split("\n")
    rate = int(lines[0].split()[1])
    return rate, [int(x) for x in lines[1:] if x.strip()]


def tone_stats(samples, level, threshold):
    n = len(samples)
    total = sum(samples)
    fields = [("samples", n), ("peak", max(abs(s) for s in samples))]
    if level >= 2:
        fields.append(("rms", math.isqrt(sum(s * s for s in samples) // n)))
    if level >= 3:
        crossings = sum(1 for a, b in zip(samples, samples[1:]) if (a < 0) != (b < 0))
        fields.append(("crossings", crossings))
        fields.append(("over", sum(1 for s in samples if abs(s) > threshold)))
    if level >= 4:
        mean = total // n if total >= 0 else -((-total) // n)
        fields.append(("mean", mean))
    return " ".join(f"{k}={v}" for k, v in fields)


def tone_freq(rate, samples):
    peak = max(abs(s) for s in samples)
    h = 0.3 * peak
    armed, first, last, count = False, None, None, 0
    for i in range(1, len(samples)):
        a, b = samples[i - 1], samples[i]
        if a < -h:
            armed = True
        if armed and a < 0 <= b:
            t = (i - 1) + a / (a - b)
            first = t if first is None else first
            last, count, armed = t, count + 1, False
    return "%.2f" % ((count - 1) * rate / (last - first))
