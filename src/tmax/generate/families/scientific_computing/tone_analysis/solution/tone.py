{{ oracle }}
import sys

MODE, LEVEL, THRESHOLD = "{{ mode }}", {{ level }}, {{ threshold }}


def main():
    rate, samples = load_samples(sys.argv[1])
    if MODE == "freq":
        print(tone_freq(rate, samples))
    else:
        print(tone_stats(samples, LEVEL, THRESHOLD))


if __name__ == "__main__":
    main()
