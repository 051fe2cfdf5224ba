"""Data shared by the makemore programs of tests/programs/test_courses_sweep17_d*.py: a few
dozen names in place of names.txt, and the lecture's (context -> next character) dataset."""

WORDS = ("emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
         "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe "
         "penelope layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella "
         "natalie zoe leah hazel violet aurora savannah audrey brooklyn bella claire skylar").split()


def build(torch, words, block_size=3):
    """X (contexts of block_size character ids, '.' = 0 padding), Y (the next id), stoi, itos."""
    chars = sorted(list(set(''.join(words))))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi['.'] = 0
    itos = {i: s for s, i in stoi.items()}
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + '.':
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y), stoi, itos
