"""Generated Chinese reviews for measuring split_cjk: train and test on different sentences.

    python bench/chinese_reviews.py --output DIR

Writes DIR/train.csv and DIR/test.csv (columns text, label): each review is a subject, a positive or negative
phrase and an ending ("这个产品很好，6天就到了。"). Training reviews take six of the twelve subjects and test reviews
the other six, so no test sentence is a training one, and the word tokenizer without split_cjk has seen none of the
clauses ("这个产品很好") a test review holds; the phrases, which carry the label, are shared.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

SUBJECTS = ["这个产品", "这部电影", "这家餐厅", "服务", "质量", "包装", "这个手机", "这件衣服", "快递", "这本书",
            "这个酒店", "客服"]
PHRASES = {"好评": ["很好", "非常满意", "特别喜欢", "物超所值", "值得推荐", "真不错", "太棒了", "很舒服"],
           "差评": ["很差", "非常失望", "不喜欢", "太贵了", "不值得买", "坏了", "很糟糕", "让人生气"]}
ENDINGS = ["。", "，6天就到了。", "，朋友也买了。", "，用了一周。", "，下次再说。", "！"]


def reviews(subjects: list[str]) -> list[tuple[str, str]]:
    return [(f"{subject}{phrase}{ending}", label) for subject in subjects for label, phrases in PHRASES.items()
            for phrase in phrases for ending in ENDINGS]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="folder to write train.csv and test.csv into")
    output = Path(parser.parse_args().output)
    output.mkdir(parents=True, exist_ok=True)
    for name, subjects in (("train", SUBJECTS[:6]), ("test", SUBJECTS[6:])):
        with open(output / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(reviews(subjects))
        print(f"{output / name}.csv: {len(reviews(subjects))} reviews")


if __name__ == "__main__":
    main()
