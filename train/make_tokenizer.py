#!/usr/bin/env python3
"""Train the byte-level BPE tokenizer of the OasisKV evaluation models (run once on a
CPU; the result, train/tokenizer/, is committed so that every machine uses the same):

    python3 train/make_texts.py /tmp/okv_texts
    .venv/bin/python train/make_tokenizer.py /tmp/okv_texts/train train/tokenizer

SmolLM2's pre-tokenizer form (each digit alone, then GPT-2's byte-level regex), which
the C tokenizer supports; 4096 tokens; <|bos|> added by a TemplateProcessing
post-processor, <|endoftext|> is EOS. Trained on the training texts only (never on the
evaluation's held-out Debian texts) plus the fixed wording of the task prompts."""
import glob
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB = 4096
SPECIALS = ["<|endoftext|>", "<|bos|>"]
# the fixed wording of the eval's prompts (src/eval/eval_tasks.c), so that it tokenizes compactly
TEMPLATES = [
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the numbers afterwards.\n",
    "\nWhat is the special magic number for key mentioned in the provided text?",
    "The special magic number for key mentioned in the provided text is",
    "\nWhat are all the special magic numbers for key mentioned in the provided text?",
    "The special magic numbers for key mentioned in the provided text are",
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ",
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n",
    "\nQuestion: Find all variables that are assigned the value 12345 in the text above.",
    "Answer: According to the chain(s) of variable assignment in the text above, 5 variables are "
    "assigned the value 12345, they are:",
    "VAR ABCDE = 12345. VAR FGHIJ = ABCDE.",
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n",
    "Question: What are the 10 most common words in the above list?",
    "Answer: The top 10 words that appear most often in the list are:",
    "Read the following coded text and track the frequency of each coded word. Find the three most "
    "frequently appeared coded words. ",
    "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most "
    "frequently appeared words in the above coded text?",
    "Answer: According to the coded text above, the three most frequently appeared words are:",
    "Answer the question based on the given document. Only give me the answer and do not output any "
    "other words.\n\nThe following is the document.\n\n",
    "\n\nAnswer the question based on the given document. Only give me the answer and do not output any "
    "other words.\n\nQuestion: In the document, which word comes right after the phrase \"a b c\"?",
    "Answer:",
    "Below is a table of code words. Each line \"A -> B\" says that the code after A is B.\n\n",
    "\nStart from the code alpha. Follow the table 4 times: at each step, find the line that starts with "
    "the current code and move to the code after it. Write every step on its own line as \"A -> B\", then "
    "write \"Final: X\" with the last code.",
    "alpha -> beta\nbeta -> gamma\nFinal: gamma",
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_tokenizer.py TEXT_DIR OUT_DIR")
    texts = []
    for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.txt"))):
        with open(p, encoding="ascii") as f:
            texts.append(f.read())
    texts += TEMPLATES * 50
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, show_progress=False, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B",
                                                       special_tokens=[("<|bos|>", tok.token_to_id("<|bos|>"))])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
    cfg = {"bos_token": "<|bos|>", "eos_token": "<|endoftext|>", "add_bos_token": True,
           "model_max_length": 32768, "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<|bos|>", "eos_token": "<|endoftext|>"}, f, indent=2)
        f.write("\n")
    print(f"{out}: vocab {tok.get_vocab_size()}, bos {tok.token_to_id('<|bos|>')}, eos {tok.token_to_id('<|endoftext|>')}")


if __name__ == "__main__":
    main()
