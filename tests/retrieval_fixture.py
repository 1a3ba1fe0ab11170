"""A small retrieval fixture of memoryd's own: a conversation and the questions it answers.

Each question names the one message that answers it and the rank (1 = first) that message must
reach, in hybrid search with the embedded model. They cover what agents ask: questions as typed
(words the answer lacks), paraphrases (no word in common), names (the sender), dates, Chinese and
Japanese text, and typos.
"""

from __future__ import annotations

import dataclasses

MAYA = "Maya"
TOM = "Tom"

# (sender, text), in order.
MESSAGES: tuple[tuple[str, str], ...] = (
    (MAYA, "Morning! The weather is finally warm enough for the balcony."),
    (TOM, "Nice. I finished the Berlin marathon in under four hours on Sunday."),
    (MAYA, "Congratulations! That's a huge achievement."),
    (MAYA, "I love sushi, especially salmon nigiri, I could eat it every day."),
    (TOM, "Ha, I'm more of a pizza person myself."),
    (MAYA, "My dentist appointment is on 14 March at 9am, so I'll be late to work."),
    (TOM, "Good luck with that. I adopted a grey kitten last week, her name is Pixel."),
    (MAYA, "Pixel is such a cute name for a cat."),
    (MAYA, "I went to my first pottery class yesterday and made a wobbly bowl."),
    (TOM, "Can you recommend a good restaurant near the central station?"),
    (MAYA, "Try the little Vietnamese place on Hill Street, their pho is great."),
    (TOM, "来月東京に引っ越します。"),
    (MAYA, "Wow, Tokyo! Are you moving for the new job?"),
    (TOM, "Yes, I got an offer from a robotics company there."),
    (MAYA, "My sister Lena is getting married in Lisbon in September."),
    (TOM, "Lisbon in September sounds lovely."),
    (MAYA, "I've been learning the violin for three years now."),
    (TOM, "I keep forgetting to water my tomato plants on the balcony."),
    (MAYA, "The quarterly report is due on Friday, I'm stressed about it."),
    (TOM, "Take a break this weekend, maybe go hiking in the hills."),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """A query, the index in MESSAGES of its answer, and the rank the answer must reach."""

    query: str
    answer: int
    within: int
    # Whether the words alone (lexical mode) rank the answer within `within`: False for
    # paraphrases and typos, which only meaning finds.
    words_find_it: bool
    # Whether the answer is relevant enough to pass the relevance floor: False for a paraphrase
    # too far from the question (the floor leaves it out, and says so).
    above_floor: bool = True


QUESTIONS: tuple[Question, ...] = (
    # Questions as typed: "When", "did", "go", "the" are not in the answer.
    Question("When did Maya go to the pottery class?", 8, 1, words_find_it=True),
    Question("What did Tom name his kitten?", 6, 1, words_find_it=True),
    # Paraphrases: no word in common with the answer.
    Question("what food does she like", 3, 2, words_find_it=False),
    Question("how did the long-distance run go", 1, 3, words_find_it=False),
    # The violin is 0.555 near, and nothing of the chat holds a word of the question: below the
    # relevance floor, as questions about things never mentioned are.
    Question(
        "which musical instrument does she play", 16, 3, words_find_it=False, above_floor=False
    ),
    # A name that only the sender holds, and a topic.
    Question("Tom marathon", 1, 1, words_find_it=True),
    # Dates.
    Question("dentist appointment date", 5, 1, words_find_it=True),
    Question("When is the wedding in Lisbon?", 14, 2, words_find_it=True),
    # Chinese and Japanese text without word breaks.
    Question("東京", 11, 1, words_find_it=True),
    # Typos.
    Question("restaurnt recomendation", 9, 3, words_find_it=False),
)


# --- a timeline: days apart, relative dates, evidence spread out, and a second chat on the same
# topics under the same agent (another owner) -----------------------------------------------------

ANA = "Ana"
BEN = "Ben"
CHEN = "Chen"
DANA = "Dana"
# The first message's day: Monday 4 March 2024.
TIMELINE_START = (2024, 3, 4)

# (days after TIMELINE_START, sender, text), in order: Ana and Ben's chat.
TIMELINE: tuple[tuple[int, str, str], ...] = (
    (0, ANA, "Back from the coast. We went sailing yesterday and the wind was wild."),
    (0, BEN, "Sounds great. I spent the weekend repainting the kitchen."),
    (3, ANA, "The new job starts next Monday and I'm a bit nervous."),
    (3, BEN, "You'll be fine. I booked the dentist for the twentieth."),
    (10, ANA, "My first week at the new job went well, the team is friendly."),
    (10, BEN, "Glad to hear it. My sister visited us two weeks ago."),
    (30, ANA, "I ran my first half marathon last Sunday!"),
    (30, BEN, "Impressive! What was your time?"),
    (30, ANA, "Two hours and five minutes, I was exhausted."),
    (45, ANA, "We adopted a dog last month, his name is Biscuit."),
    (45, BEN, "Biscuit is a perfect name for a dog."),
    (60, ANA, "Work is busy, the team launches the app in June."),
)

# Chen and Dana's chat, under the same agent: the same topics, other people.
OTHER_TIMELINE: tuple[tuple[int, str, str], ...] = (
    (1, CHEN, "We went sailing yesterday too, the harbour was calm."),
    (1, DANA, "I prefer the mountains to the sea."),
    (20, CHEN, "I signed up for a half marathon in the autumn."),
    (20, DANA, "We adopted a cat, her name is Miso."),
)


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineQuestion:
    """A query; the indexes in TIMELINE of its answers, each to be within `within`; and whether
    it is asked of the whole agent (both chats) rather than of Ana and Ben's chat."""

    query: str
    answers: tuple[int, ...]
    within: int
    whole_agent: bool = False


TIMELINE_QUESTIONS: tuple[TimelineQuestion, ...] = (
    # The day is named; the answer says "yesterday", and was said the day after.
    TimelineQuestion("What did Ana do on 3 March 2024?", (0,), 1),
    # A month named: "last month" said in mid-April is March.
    TimelineQuestion("What happened to Ana in March?", (0, 9), 5),
    # "When": the answer says when.
    TimelineQuestion("When did Ana run a half marathon?", (6,), 1),
    # Spread out: the evidence is in two sessions, a month apart. ("Which sports does Ana do?"
    # shares no word with it: sailing and the half marathon are 0.55 near, no nearer than
    # "Impressive! What was your time?", and at the relevance floor.)
    TimelineQuestion("Did Ana go running or sailing?", (0, 6), 5),
    # Across chats: Chen sailed too and signed up for a half marathon, but the question is Ana's.
    TimelineQuestion("Where did Ana go sailing?", (0,), 1, whole_agent=True),
    TimelineQuestion("What is the name of Ana's dog?", (9,), 2, whole_agent=True),
)
