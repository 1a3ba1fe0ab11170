"""A relevance fixture of memoryd's own: what must come back, and what must not.

A chat whose content turns are each followed by a turn that says nothing ("Sounds good,
thanks."), whose vector carries the turn before it; facts whose keys and values share pieces
with the commonest words ("is", "the", "of", "a"); and questions of ordinary short words about
things the chat never talks of. Through the real server (tests/memory/test_relevance.py), in
hybrid mode with the embedded model: the questions about nothing get no hit, the filler never
comes before the turn that holds what was asked (yet is found when it is itself what was asked:
"thanks"), and the facts answer only what they hold.
"""

from __future__ import annotations

MAYA = "Maya"
TOM = "Tom"

# (sender, text), in order: content, then filler after it.
CHAT: tuple[tuple[str, str], ...] = (
    (MAYA, "Want to grab an espresso at the little coffee bar on Hill Street tomorrow?"),
    (TOM, "Sounds good, thanks."),
    (MAYA, "My sister is getting married in Lisbon in September."),
    (TOM, "Oh wow, that's great!"),
    (MAYA, "I started learning the violin, the lessons are on Mondays."),
    (TOM, "ok"),
    (MAYA, "The landlord finally fixed the leaking kitchen tap."),
    (TOM, "haha yes"),
    (MAYA, "Our team ships the mobile app release next Thursday."),
    (TOM, "Thanks!"),
    (MAYA, "I adopted a grey kitten, her name is Pixel."),
    (TOM, "Cool, cool."),
)
# The turn that holds what each query asks about (an index of CHAT): it must come first.
CONTENT_FIRST: tuple[tuple[str, int], ...] = (
    ("coffee", 0),
    ("espresso", 0),
    ("where are we getting coffee", 0),
    ("wedding in Lisbon", 2),
    ("violin lessons", 4),
    ("kitchen tap", 6),
    ("app release", 8),
    ("kitten name", 10),
)
# What a filler turn says, asked for itself: the turns (indexes of CHAT) that hold it.
FILLER_ASKED: tuple[tuple[str, frozenset[int]], ...] = (
    ("thanks", frozenset({1, 9})),
    ("cool", frozenset({11})),
)

# (key, value): keys and values that hold the commonest words, or pieces of them.
FACTS: tuple[tuple[str, str], ...] = (
    ("is-vegetarian", "Is vegetarian"),
    ("theater-tickets", "Has theater tickets for the opera on Friday"),
    ("office-of-the-mayor", "Works at the office of the mayor"),
    ("island-trip", "Is planning an island trip in August"),
    ("a-cappella", "Sings in an a cappella group"),
)
# A query and the fact (an index of FACTS) it must find first.
FACT_FOUND: tuple[tuple[str, int], ...] = (
    ("vegetarian", 0),
    ("theater", 1),
    ("mayor", 2),
    ("island", 3),
    ("cappella", 4),
)

# Questions about things neither the chat nor the facts ever mention, in ordinary short words.
OFF_TOPIC: tuple[str, ...] = (
    "What is the capital of Mongolia?",
    "Who won the World Cup in 1998?",
    "How old is the moon?",
    "Is it going to rain in Oslo?",
    "How far is it to the sun?",
    "Who is the king of Spain?",
    "What do bees eat?",
    "How many legs does a spider have?",
    "Can you fix a flat tire?",
    "What is the best way to cook rice?",
    "Where do penguins live?",
    "How tall is the Eiffel Tower?",
    "Why is the sea salty?",
    "When did the war end?",
    "What is a black hole?",
    "How do I get to the airport?",
    "Is the bank open on Sunday?",
    "What time is it in Tokyo?",
    "Who wrote the Odyssey?",
    "How much is a bus ticket?",
    "Is it a good day for a hike?",
    "What is the speed of light?",
    "How do you say hello in Greek?",
    "Who was the first man on the moon?",
    "What is the boiling point of water?",
)
# Words that mean nothing, or pieces of words too short to: they find nothing at all.
MEANINGLESS: tuple[str, ...] = ("is", "the", "of", "a", "an", "of the", "is a", "th", "ve")
