"""A synthetic chat corpus with a realistic vocabulary, for the search benchmarks.

Word frequencies follow Zipf's law (exponent 1.07, as measured on English text) over a ranked
vocabulary: English function words at the top, then common chat nouns and verbs, then a long
tail of generated words. Messages are 3-40 words (log-normal, median ~12). A small share
carries Japanese text, emoji and Cyrillic, so substring search is exercised too. Everything is
seeded: the same arguments give the same corpus.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import random

FUNCTION_WORDS = (
    "the to and a i you it of is in that for my me on this be have with so do not we are"
    " was just can but at what if your all get about like will up out there one know no"
    " they it's i'm from or an don't think would go how when yes he she our as good time"
    " by did them some then now well could really want more here been"
).split()
CHAT_WORDS = (
    "meeting tomorrow deploy checklist dentist friday monday weekend flight hotel booking"
    " invoice budget report draft email slack project deadline review release branch server"
    " database backup password birthday dinner lunch coffee gym doctor appointment insurance"
    " passport visa train ticket rent apartment landlord grocery recipe pasta garden bike car"
    " mechanic kids school homework teacher vacation beach mountain hiking camera phone laptop"
    " charger battery update bug crash logs metrics dashboard alert oncall incident postmortem"
    " roadmap quarter sprint standup retro customer contract lawyer taxes refund subscription"
    " podcast book movie concert tickets playlist guitar piano lesson marathon training diet"
    " allergy medicine pharmacy vet dog cat walk parents sister brother wedding gift flowers"
    " anniversary museum language spanish german japanese course exam interview resume salary"
    " promotion manager team hiring onboarding laptop office commute traffic weather rain snow"
).split()
SYLLABLES = (
    "ka ri to mo na ve lo sa tra den pol mar kin sel bro fen gal hut jor lum nex pra quo"
    " rin sto tul vin wex yor zan bel cor dra eth fro gul hen ist jak kol mek nor"
).split()
EXTRAS = (
    "東京タワーに行きました",
    "明日は会議があります",
    "🎉",
    "😀",
    "🚀",
    "привет",
    "встреча",
    "café",
    "naïve",
)
ZIPF_EXPONENT = 1.07


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Ranked words and their cumulative Zipf weights."""

    words: tuple[str, ...]
    cumulative: tuple[float, ...]

    def sample(self, rng: random.Random, count: int) -> list[str]:
        """`count` words drawn by frequency."""
        top = self.cumulative[-1]
        picks = (bisect.bisect(self.cumulative, rng.random() * top) for _ in range(count))
        return [self.words[index] for index in picks]

    def content_words(self, lowest_rank: int = 100, highest_rank: int = 5000) -> tuple[str, ...]:
        """Mid-frequency words: what people actually search for."""
        return self.words[lowest_rank:highest_rank]


def vocabulary(size: int = 30_000, seed: int = 7) -> Vocabulary:
    """A ranked vocabulary of `size` words."""
    rng = random.Random(seed)
    generated: list[str] = []
    seen = set(FUNCTION_WORDS) | set(CHAT_WORDS)
    while len(FUNCTION_WORDS) + len(CHAT_WORDS) + len(generated) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            generated.append(word)
    # Chat words are common but not function-word common: interleave them into the upper ranks.
    ranked = list(FUNCTION_WORDS)
    tail = iter(generated)
    for word in CHAT_WORDS:
        ranked.append(word)
        ranked.extend(itertools.islice(tail, 3))
    ranked.extend(tail)
    weights = [1 / (rank**ZIPF_EXPONENT) for rank in range(1, len(ranked) + 1)]
    return Vocabulary(tuple(ranked), tuple(itertools.accumulate(weights)))


def message_text(rng: random.Random, words: Vocabulary) -> str:
    """One chat message."""
    length = max(3, min(40, round(math.exp(rng.gauss(math.log(12), 0.6)))))
    tokens = words.sample(rng, length)
    if rng.random() < 0.02:
        tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(EXTRAS))
    text = " ".join(tokens)
    return text[0].upper() + text[1:] + rng.choice((".", "", "?", "!"))
