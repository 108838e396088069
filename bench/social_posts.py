"""Generated social-media posts for measuring the social_media cleaning: URLs, @mentions, #hashtags, emoji.

    python bench/social_posts.py --output DIR [--seed 0]

Writes DIR/train.csv (3,000 posts) and DIR/test.csv (1,000), columns text and label (happy, angry, news). Each post
is a neutral sentence shared by all classes, with its label carried by one of three channels, chosen at random: a
word ("sooo good", its letters repeated a random number of times), emoji (repeated, and often typed against the
punctuation or word before them: "!!😍😍") or a hashtag in mixed case ("#Blessed"). Around them sits what real posts
carry: a shortened URL with a random path, an @mention of one of 400 users, an HTML entity as the APIs deliver them
("&amp;"), Turkish place names ("İstanbul") and shouting; 5% of the labels are flipped. Test posts are drawn apart
from training ones (another random stream), so what scores them is what the classes share, not memorised posts.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

SENTENCES = ["just got back from {place}", "the new {thing} update is out", "waiting for the {thing} at {place}",
             "my {thing} arrived today", "talking about the {thing} with everyone in {place}",
             "first time trying the {thing}", "weekend in {place}", "{place} this morning",
             "they changed the {thing} again", "the {thing} in {place} is ILIK today"]
PLACES = ["İstanbul", "İzmir", "Ankara", "london", "the office", "the airport", "Berlin", "the mall"]
THINGS = ["phone", "app", "train", "coffee", "bus", "game", "laptop", "show", "menu", "delivery"]
WORDS = {"happy": ["so good", "love it", "amazing", "best day", "so happy", "great"],
         "angry": ["so bad", "hate it", "awful", "worst day", "so angry", "terrible"],
         "news": ["announced today", "report says", "officials confirm", "update:", "breaking", "statement"]}
EMOJI = {"happy": ["😍", "😂", "🥰", "😊", "🎉"], "angry": ["😡", "🤬", "😤", "👎", "💩"],
         "news": ["📢", "📰", "🗞", "🔴", "📺"]}
HASHTAGS = {"happy": ["blessed", "goodvibes", "love", "winning"], "angry": ["fail", "neveragain", "rant", "ugh"],
            "news": ["news", "breaking", "update", "live"]}


def elongated(phrase: str, rng: random.Random) -> str:
    """A phrase as posts stretch it: one of its vowels repeated 1-6 times more ("sooo goood")."""
    vowels = [i for i, char in enumerate(phrase) if char in "aeiou"]
    if not vowels or rng.random() < 0.4:
        return phrase
    at = rng.choice(vowels)
    return phrase[:at] + phrase[at] * rng.randint(2, 7) + phrase[at + 1:]


def post(label: str, rng: random.Random) -> str:
    words = rng.choice(SENTENCES).format(place=rng.choice(PLACES), thing=rng.choice(THINGS)).split()
    channel = rng.choice(["word", "emoji", "hashtag"])
    if channel == "word":
        words.insert(rng.randint(0, len(words)), elongated(rng.choice(WORDS[label]), rng))
    elif channel == "emoji":
        emoji = rng.choice(EMOJI[label]) * rng.randint(1, 4)
        if rng.random() < 0.6:  # typed against what comes before it, as phones do
            words[-1] += rng.choice(["", "!", "!!", "...", "?!"]) + emoji
        else:
            words.append(emoji)
    else:
        tag = rng.choice(HASHTAGS[label])
        words.append("#" + rng.choice([tag, tag.capitalize(), tag.upper()]))
    if rng.random() < 0.4:
        words.insert(0, f"@user{rng.randrange(400)}")
    if rng.random() < 0.2:
        words.insert(rng.randint(0, len(words)), "&amp;")
    if rng.random() < 0.5:
        path = "".join(rng.choice("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(10))
        words.append(f"https://t.co/{path}")
    text = " ".join(words)
    return text.upper() if rng.random() < 0.1 else text


def posts(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    labels = list(WORDS)
    rows = []
    for _ in range(count):
        label = rng.choice(labels)
        text = post(label, rng)
        rows.append((text, rng.choice(labels) if rng.random() < 0.05 else label))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="folder to write train.csv and test.csv into")
    parser.add_argument("--seed", type=int, default=0, help="seed of the training posts (test: seed + 1)")
    args = parser.parse_args()
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    for name, count, seed in (("train", 3000, args.seed), ("test", 1000, args.seed + 1)):
        with open(output / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(posts(count, seed))
        print(f"{output / name}.csv: {count} posts")


if __name__ == "__main__":
    main()
