"""Phrase lexicons of the pair features: matched on lowercase word tokens, punctuation ignored.

A phrase matches a run of consecutive word tokens inside one sentence, so "Sure. Here" is not
"sure here". Curly apostrophes are folded to "'" before matching. Lists are ours (rmlens),
written for chat-assistant responses; sentiment and emotion come from packaged lexicons
(vaderSentiment, NRCLex), loaded in ``_text.py``.
"""

from __future__ import annotations

REFUSAL = (
    "i can't help", "i cannot help", "i can't assist", "i cannot assist",
    "i can't provide", "i cannot provide", "i can't do that", "i cannot do that",
    "i can't answer", "i cannot answer", "i can't give", "i cannot give",
    "i can't tell you", "i cannot tell you", "i can't recommend", "i cannot recommend",
    "i can't support", "i cannot support", "i can't comply", "i cannot comply",
    "i can't share", "i cannot share", "i can't encourage", "i cannot encourage",
    "i won't", "i will not", "i'm not able to", "i am not able to", "i'm unable to",
    "i am unable to", "i'm sorry but", "i am sorry but", "sorry but i", "i apologize but",
    "i must decline", "i have to decline", "i'm not comfortable", "i am not comfortable",
    "i don't feel comfortable", "i do not feel comfortable", "not appropriate",
    "i'd rather not", "i would rather not", "i refuse", "i'm not going to",
    "i am not going to", "i don't think i can", "i'm afraid i can't", "i'm afraid i cannot",
    "i strongly advise against", "i don't condone", "i do not condone",
    "i can't in good conscience", "that would be illegal", "that is illegal",
    "that's illegal", "it's illegal", "it is illegal", "is against the law",
)

COMPLIANCE_OPENERS = (
    "sure", "certainly", "of course", "absolutely", "definitely", "yes", "yeah", "okay",
    "ok", "no problem", "gladly", "happy to", "here is", "here are", "here's",
)

COMPLIANCE = (
    "here is", "here are", "here's", "i'd be happy to", "i would be happy to",
    "happy to help", "glad to help", "i can help", "let me help", "let me explain",
    "the answer is", "you can try", "you could try", "step 1", "first you",
)

PLEASE = ("please", "kindly")

THANKS = ("thank", "thanks", "appreciate", "appreciated", "grateful")

APOLOGY = ("sorry", "apologize", "apologise", "apologies", "apology", "pardon", "forgive me")

HEDGES = (
    "perhaps", "maybe", "might", "possibly", "probably", "likely", "i think", "i believe",
    "i guess", "i suppose", "seems", "may be", "could be", "somewhat",
    "generally", "typically", "usually", "not sure", "in my opinion", "it depends",
    "sort of", "kind of", "arguably", "roughly", "approximately",
)

ANTHROPOMORPHIC = (
    "i feel", "i felt", "i love", "i enjoy", "i like", "i hate", "i'm happy", "i am happy",
    "i'm glad", "i am glad", "i'm excited", "i am excited", "i'm sad", "i am sad",
    "i'm curious", "i am curious", "my favorite", "my favourite", "i remember", "i wish",
    "i hope", "i miss", "personally", "my feelings", "my emotions", "when i was", "i've been",
    "my friend", "my family", "i'm worried", "i am worried", "i'm proud", "i am proud",
)

AI_SELF_REFERENCE = (
    "as an ai", "as an artificial intelligence", "as a language model", "as an assistant",
    "i'm an ai", "i am an ai", "i'm a language model", "i am a language model",
    "i'm just an ai", "i am just an ai", "i'm a bot", "i am a bot", "i'm a computer program",
    "i am a computer program", "i'm a machine", "i am a machine", "i don't have feelings",
    "i do not have feelings", "i don't have personal", "i do not have personal",
    "i don't have emotions", "i do not have emotions", "i'm not a human", "i am not a human",
    "i'm not human", "i am not human", "my training data", "my programming", "i was trained",
    "i'm not a person", "i am not a person",
)

PRAISE = (
    "great question", "good question", "excellent question", "interesting question",
    "fantastic question", "wonderful question", "awesome question", "thoughtful question",
    "what a great", "what a wonderful", "that's a great", "that is a great",
    "that's a wonderful", "great idea", "good idea", "excellent idea", "excellent point",
    "great point", "good point", "well said", "brilliant", "impressive", "you're so",
    "you are so", "you did a great", "love this question", "love that idea",
)

AGREEMENT = (
    "you're right", "you are right", "absolutely right", "you're correct", "you are correct",
    "i agree", "i completely agree", "i totally agree", "i fully agree", "that's right",
    "that is right", "that's correct", "that is correct", "exactly right", "good catch",
    "my mistake", "i stand corrected", "you make a good point", "you make a great point",
)

FIRST_PERSON = ("i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll")

# Sentence openers that make a sentence an imperative (dialog act), in base form.
IMPERATIVE_VERBS = frozenset((
    "add", "allow", "apply", "ask", "avoid", "be", "begin", "bring", "buy", "call", "change",
    "check", "choose", "click", "come", "consider", "contact", "continue", "copy", "create",
    "cut", "decide", "delete", "describe", "do", "don't", "drink", "eat", "enjoy", "ensure",
    "enter", "explain", "find", "fill", "follow", "forget", "get", "give", "go", "have", "help",
    "imagine", "include", "install", "keep", "learn", "leave", "let", "let's", "limit", "list",
    "look", "make", "mix", "move", "never", "note", "open", "pay", "pick", "place", "please",
    "practice", "prepare", "press", "put", "read", "reach", "remember", "remove", "replace",
    "report", "repeat", "rest", "return", "run", "save", "say", "see", "seek", "select", "send",
    "set", "share", "show", "sign", "sit", "start", "stay", "step", "stop", "take", "talk",
    "tell", "think", "try", "turn", "type", "use", "visit", "wait", "wash", "watch", "wear",
    "write", "always",
))
