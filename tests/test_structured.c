/* label: unit */
/* Structured output (src/structured/json.c): the token mask that the trie walk computes equals
 * feeding every token's bytes to the recognizer one id at a time, on SmolLM2's vocabulary
 * (49,152 ids), in states taken at every byte of JSON texts (inside strings, numbers, keys,
 * nested containers, after a complete value), and under a JSON schema; end-of-generation is
 * allowed exactly when the text is complete, special tokens never. The recognizer's verdicts against Python's json
 * module: tests/sh/test_json_ref.sh. */
#include "oasiskv/structured.h"
#include "oasiskv/tokenizer.h"
#include "testutil.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_docs[] = {
    "{\"name\": \"Felix\", \"age\": 10, \"tags\": [\"a\\u00e9\", -1.5e+3, true, null], \"x\": {\"y\": []}}",
    "{\n  \"caf\xc3\xa9\": \"\xe4\xb8\xad\\n\",\n  \"n\": 0.25\n}",
    "{\"a\":[{\"b\":[0,1,2]},{}],\"c\":false}",
};

/* the mask of state s (into lg[n]) against feeding each token's bytes to a copy of s: the ids where they
 * disagree (a count that differs from the ids fed counts as one more); *allowed: the mask's count */
static int mask_vs_feeding(const struct okv_json_state *s, const okv_token_trie *trie, const int32_t *eog, int n_eog,
                           float *lg, int n, int *allowed)
{
    for (int k = 0; k < n; k++)
        lg[k] = 0.0f;
    *allowed = okv_json_mask(s, trie, eog, n_eog, lg, n);
    int bad = 0, count = 0;
    for (int32_t id = 0; id < n; id++) {
        int nb = 0;
        const uint8_t *b = okv_token_trie_bytes(trie, id, &nb);
        struct okv_json_state c = *s;
        const bool want = nb > 0 && okv_json_feed_n(&c, b, (size_t)nb);
        bad += want != !isinf(lg[id]);
        count += want;
    }
    return bad + (count != *allowed);
}

int main(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/smollm2/tokenizer.json", tu_src_dir());
    okv_tokenizer *tok = NULL;
    if (okv_tokenizer_from_json_file(path, &tok) != OKV_OK) {
        CHECK(0, "load %s: %s", path, okv_last_error());
        return tu_finish("test_structured");
    }
    okv_token_trie *trie = NULL;
    CHECK(okv_token_trie_build(tok, &trie) == OKV_OK, "trie: %s", okv_last_error());
    const int n = okv_tokenizer_n_vocab(tok);
    int32_t eog[4];
    int n_eog = 0;
    for (int32_t id = 0; id < n && n_eog < 4; id++)
        if (okv_tokenizer_is_eog(tok, id))
            eog[n_eog++] = id;
    CHECK(n_eog >= 1, "SmolLM2 has an end-of-generation id");
    float *lg = malloc(sizeof(float) * (size_t)n);
    int states = 0, wrong = 0, special_allowed = 0;
    double t_mask = 0;
    int n_masks = 0;
    /* the last document under a JSON schema: names, enum values and integers narrow the masks */
    static const char schema[] = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"
                                 "{\"type\":\"integer\"},\"color\":{\"enum\":[\"red\",\"blue\"]},\"tags\":{\"type\":"
                                 "\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}},\"required\":[\"name\",\"age\"]}";
    okv_json_schema *sch = NULL;
    CHECK(okv_json_schema_compile(schema, sizeof schema - 1, &sch) == OKV_OK, "schema: %s", okv_last_error());
    static const char *const k_schema_doc = "{\"name\": \"Felix\", \"age\": 10, \"color\": \"blue\", \"tags\": [\"a\", \"b\"]}";
    const size_t n_docs = sizeof k_docs / sizeof k_docs[0];
    for (size_t d = 0; d <= n_docs; d++) {
        struct okv_json_state s;
        const char *doc = d < n_docs ? k_docs[d] : k_schema_doc;
        if (d < n_docs)
            okv_json_init(&s, true);
        else
            okv_json_init_schema(&s, sch);
        const size_t len = strlen(doc);
        for (size_t i = 0; i <= len; i++) {
            /* the mask in this state */
            for (int k = 0; k < n; k++)
                lg[k] = 0.0f;
            const double t0 = okv_now();
            const int allowed = okv_json_mask(&s, trie, eog, n_eog, lg, n);
            t_mask += okv_now() - t0;
            n_masks++;
            /* against feeding each id's bytes */
            int count = 0;
            for (int32_t id = 0; id < n; id++) {
                int nb = 0;
                const uint8_t *b = okv_token_trie_bytes(trie, id, &nb);
                bool want;
                bool is_eog = false;
                for (int e = 0; e < n_eog; e++)
                    is_eog |= eog[e] == id;
                if (is_eog) {
                    want = okv_json_complete(&s);
                } else if (nb == 0) {
                    want = false;   /* special or empty */
                } else {
                    struct okv_json_state c = s;
                    want = okv_json_feed_n(&c, b, (size_t)nb);
                }
                const bool got = !isinf(lg[id]);
                wrong += got != want;
                count += want;
                if (got && nb == 0 && !is_eog)
                    special_allowed++;
            }
            CHECK(count == allowed, "doc %zu at byte %zu: the mask counts %d allowed, %d by feeding", d, i, allowed, count);
            states++;
            if (i < len)
                CHECK(okv_json_feed(&s, (uint8_t)doc[i]), "doc %zu: byte %zu refused", d, i);
        }
        CHECK(okv_json_complete(&s), "doc %zu complete at its end", d);
    }
    CHECK(wrong == 0, "%d (state, id) pairs where the trie walk and the byte-by-byte feeding disagree", wrong);
    CHECK(special_allowed == 0, "%d special tokens allowed", special_allowed);
    printf("  %d states x %d ids: the trie's masks equal feeding each token; %.2f ms a mask on this machine\n", states, n,
           1e3 * t_mask / n_masks);

    /* the first token of a JSON-object answer: '{' (maybe after whitespace), never a quote or a digit */
    {
        struct okv_json_state s;
        okv_json_init(&s, true);
        for (int k = 0; k < n; k++)
            lg[k] = 0.0f;
        okv_json_mask(&s, trie, eog, n_eog, lg, n);
        int32_t *ids = NULL;
        size_t nid = 0;
        okv_tokenizer_encode(tok, "{", 1, false, false, &ids, &nid);
        CHECK(nid == 1 && !isinf(lg[ids[0]]), "'{' allowed first");
        okv_free(ids);
        okv_tokenizer_encode(tok, "\"", 1, false, false, &ids, &nid);
        CHECK(nid == 1 && isinf(lg[ids[0]]), "a quote refused first (the value must be an object)");
        okv_free(ids);
        for (int e = 0; e < n_eog; e++)
            CHECK(isinf(lg[eog[e]]), "end of generation refused before the object");
    }
    /* limits: nesting past OKV_JSON_MAX_DEPTH, whitespace runs past OKV_JSON_MAX_WS, a failed state */
    {
        struct okv_json_state s;
        okv_json_init(&s, false);
        int ok = 0;
        for (int i = 0; i < OKV_JSON_MAX_DEPTH + 1; i++)
            ok += okv_json_feed(&s, '[');
        CHECK(ok == OKV_JSON_MAX_DEPTH, "nesting stops at %d (%d accepted)", OKV_JSON_MAX_DEPTH, ok);
        okv_json_init(&s, false);
        ok = 0;
        for (int i = 0; i < OKV_JSON_MAX_WS + 1; i++)
            ok += okv_json_feed(&s, ' ');
        CHECK(ok == OKV_JSON_MAX_WS, "whitespace runs stop at %d (%d accepted)", OKV_JSON_MAX_WS, ok);
        for (int k = 0; k < n; k++)
            lg[k] = 0.0f;
        CHECK(okv_json_mask(&s, trie, eog, n_eog, lg, n) == 0, "a failed state allows nothing");
        okv_json_init(&s, false);
        CHECK(okv_json_feed_n(&s, (const uint8_t *)"12", 2) && okv_json_complete(&s), "a top-level number is complete");
        CHECK(!okv_json_feed(&s, ' '), "nothing follows a complete top-level value, whitespace neither");
    }
    /* under the schema: after {"name": "x", "age": the mask allows digits and '-', not a quote or '1.' */
    {
        struct okv_json_state s;
        okv_json_init_schema(&s, sch);
        const char *pre = "{\"name\": \"x\", \"age\": ";
        okv_json_feed_n(&s, (const uint8_t *)pre, strlen(pre));
        struct okv_json_state c = s;
        CHECK(okv_json_feed(&c, '7') && !okv_json_feed(&c, '.'), "an integer takes no fraction");
        c = s;
        CHECK(!okv_json_feed(&c, '"'), "a string where an integer goes is refused");
    }
    /* guided_choice: the text is one of the strings; a choice that another extends is complete and goes on */
    {
        const char *const choices[] = {"yes", "no", "yes please", "caf\xc3\xa9"};
        okv_json_schema *ch = NULL;
        CHECK(okv_json_choice_compile(choices, 4, &ch) == OKV_OK, "choice: %s", okv_last_error());
        struct okv_json_state s;
        okv_json_init_schema(&s, ch);
        CHECK(!okv_json_complete(&s), "nothing written is no choice");
        int allowed = 0;
        const int bad = mask_vs_feeding(&s, trie, eog, n_eog, lg, n, &allowed);
        CHECK(bad == 0 && allowed > 0, "choice mask: %d ids differ from feeding, %d allowed", bad, allowed);
        CHECK(okv_json_feed_n(&s, (const uint8_t *)"yes", 3) && okv_json_complete(&s), "\"yes\" is a choice");
        struct okv_json_state c = s;
        CHECK(okv_json_feed_n(&c, (const uint8_t *)" please", 7) && okv_json_complete(&c), "\"yes please\" is one");
        c = s;
        CHECK(!okv_json_feed(&c, '!'), "\"yes!\" is none");
        okv_json_init_schema(&c, ch);
        CHECK(okv_json_feed_n(&c, (const uint8_t *)"caf\xc3\xa9", 5) && okv_json_complete(&c), "a non-ASCII choice");
        okv_json_schema_free(ch);
        const char *none[] = {"a", ""};
        CHECK(okv_json_choice_compile(none, 2, &ch) == OKV_ERR_INVALID_ARG && !ch, "an empty choice is refused");
    }
    /* guided_regex: the text fully matches; the mask equals feeding each token's bytes; end of generation once it
     * matches; a regex outside the subset refused by name */
    {
        okv_json_schema *rx = NULL;
        const char *pat = "(yes|no), [a-z]{2,4}\\.";
        CHECK(okv_json_regex_compile(pat, strlen(pat), &rx) == OKV_OK, "regex: %s", okv_last_error());
        struct okv_json_state s;
        if (rx)
            okv_json_init_schema(&s, rx);
        for (int step = 0; rx && step < 3; step++) {   /* at the start, after "yes", after "no, ab" */
            static const char *const pre[3] = {"", "yes", "no, ab"};
            okv_json_init_schema(&s, rx);
            CHECK(okv_json_feed_n(&s, (const uint8_t *)pre[step], strlen(pre[step])), "regex prefix '%s'", pre[step]);
            int allowed = 0;
            const int bad = mask_vs_feeding(&s, trie, eog, n_eog, lg, n, &allowed);
            CHECK(bad == 0 && allowed > 0, "regex mask after '%s': %d ids differ from feeding, %d allowed", pre[step],
                  bad, allowed);
        }
        if (rx) {
            okv_json_init_schema(&s, rx);
            CHECK(!okv_json_complete(&s) && okv_json_feed_n(&s, (const uint8_t *)"no, abc", 7) && !okv_json_complete(&s) &&
                  okv_json_feed(&s, '.') && okv_json_complete(&s) && !okv_json_feed(&s, 'x'),
                  "\"no, abc.\" matches, and nothing follows");
            for (int k = 0; k < n; k++)
                lg[k] = 0.0f;
            okv_json_init_schema(&s, rx);
            okv_json_feed_n(&s, (const uint8_t *)"yes, ab.", 8);
            const int left = okv_json_mask(&s, trie, eog, n_eog, lg, n);
            CHECK(n_eog == 0 || (left == n_eog && !isinf(lg[eog[0]])), "a full match: only the end of generation left "
                  "(%d)", left);
        }
        okv_json_schema_free(rx);
        rx = NULL;
        CHECK(okv_json_regex_compile("(?=a)b", 6, &rx) != OKV_OK && !rx && strstr(okv_last_error(), "look"),
              "a lookahead is refused by name: %s", okv_last_error());
    }
    /* guided_grammar: the text is a sentence of a GBNF grammar (recursive: nested lists); the mask equals feeding
     * each token's bytes at the start, inside a nesting and after a complete sentence; the end of generation once
     * complete; a bad grammar refused by name; a nesting past the grammar's depth is told apart (overflowed) */
    {
        okv_json_schema *gm = NULL;
        const char *g = "root ::= list \".\"\nlist ::= \"(\" item (\" \" item)* \")\"\nitem ::= [a-z]+ | [0-9]{1,3} | list\n";
        CHECK(okv_json_grammar_compile(g, strlen(g), &gm) == OKV_OK, "grammar: %s", okv_last_error());
        struct okv_json_state s;
        for (int step = 0; gm && step < 3; step++) {
            static const char *const pre[3] = {"", "(ab (12 ", "(ab (12 (x"};
            okv_json_init_schema(&s, gm);
            CHECK(okv_json_feed_n(&s, (const uint8_t *)pre[step], strlen(pre[step])), "grammar prefix '%s'", pre[step]);
            int allowed = 0;
            const int bad = mask_vs_feeding(&s, trie, eog, n_eog, lg, n, &allowed);
            CHECK(bad == 0 && allowed > 0, "grammar mask after '%s': %d ids differ from feeding, %d allowed", pre[step],
                  bad, allowed);
        }
        if (gm) {   /* a complete sentence: the end of generation alone */
            okv_json_init_schema(&s, gm);
            okv_json_feed_n(&s, (const uint8_t *)"(a (b) 7).", 10);
            for (int k = 0; k < n; k++)
                lg[k] = 0.0f;
            const int left = okv_json_mask(&s, trie, eog, n_eog, lg, n);
            CHECK(left == n_eog && !isinf(lg[eog[0]]), "a sentence: only the end of generation left (%d)", left);
        }
        if (gm) {
            okv_json_init_schema(&s, gm);
            CHECK(okv_json_feed_n(&s, (const uint8_t *)"(ab (12 x) 3)", 13) && !okv_json_complete(&s) &&
                  okv_json_feed(&s, '.') && okv_json_complete(&s) && !okv_json_feed(&s, '.') && !okv_json_overflowed(&s),
                  "\"(ab (12 x) 3).\" is a sentence, and nothing follows");
            okv_json_init_schema(&s, gm);
            CHECK(!okv_json_feed_n(&s, (const uint8_t *)"(ab 1234", 8) && !okv_json_overflowed(&s),
                  "a number of four digits is refused, and is no overflow");
            okv_json_init_schema(&s, gm);
            bool fed = true;
            for (int k = 0; k < 400 && fed; k++)
                fed = okv_json_feed(&s, '(');
            CHECK(!fed && okv_json_overflowed(&s), "400 nested lists pass the grammar's depth: refused as an overflow");
        }
        okv_json_schema_free(gm);
        gm = NULL;
        CHECK(okv_json_grammar_compile("root ::= itm", 12, &gm) != OKV_OK && !gm && strstr(okv_last_error(), "itm"),
              "an undefined rule is refused by name: %s", okv_last_error());
        CHECK(okv_json_grammar_compile("root ::= \"a\"\nb: \"c\"", 18, &gm) != OKV_OK && !gm &&
              strstr(okv_last_error(), "GBNF"), "Lark syntax inside a GBNF grammar is refused, asking for GBNF: %s",
              okv_last_error());
        CHECK(okv_json_grammar_compile("start: \"a\" B\nB: /[0-9]/", 23, &gm) == OKV_OK && gm,
              "a Lark grammar compiles: %s", okv_last_error());
        okv_json_schema_free(gm);
        gm = NULL;
    }
    /* the mask cache: the same masks as the walk, over a document fed token by token as a model writes it
     * (SmolLM2's tokenization of a pretty-printed object, twice: the second pass all hits); ids whose logit is
     * -inf already do not poison an entry */
    {
        okv_json_mask_cache *mc = NULL;
        CHECK(okv_json_mask_cache_create(n, 256, &mc) == OKV_OK, "cache: %s", okv_last_error());
        const char *doc = "{\n  \"name\": \"Felix the cat\",\n  \"age\": 10,\n  \"tags\": [\"indoor\", \"lazy\", \"orange\"],\n"
                          "  \"owner\": {\"name\": \"Ann\", \"city\": \"Paris\"},\n  \"notes\": \"likes to sleep in the sun "
                          "and to eat fish\"\n}";
        int32_t *ids = NULL;
        size_t nid = 0;
        okv_tokenizer_encode(tok, doc, strlen(doc), false, false, &ids, &nid);
        float *lc = malloc(sizeof(float) * (size_t)n);
        int diff = 0;
        double t_walk = 0, t_cache = 0;
        for (int pass = 0; pass < 2; pass++) {
            struct okv_json_state s;
            okv_json_init(&s, true);
            for (size_t i = 0; i <= nid; i++) {
                for (int k = 0; k < n; k++)
                    lg[k] = lc[k] = (k % 97 == 0) ? -INFINITY : 0.0f;
                double t0 = okv_now();
                const int a = okv_json_mask(&s, trie, eog, n_eog, lg, n);
                double t1 = okv_now();
                const int b = okv_json_mask_cached(mc, &s, trie, eog, n_eog, lc, n);
                double t2 = okv_now();
                t_walk += t1 - t0;
                t_cache += t2 - t1;
                diff += a != b || memcmp(lg, lc, sizeof(float) * (size_t)n) != 0;
                if (i < nid) {
                    int nb = 0;
                    const uint8_t *by = okv_token_trie_bytes(trie, ids[i], &nb);
                    okv_json_feed_n(&s, by, (size_t)nb);
                }
            }
        }
        uint64_t hits, misses;
        okv_json_mask_cache_stats(mc, &hits, &misses);
        CHECK(diff == 0, "%d masks from the cache differ from the walk's", diff);
        CHECK(hits >= nid + 1, "the second pass hits every state (%llu hits, %llu misses)", (unsigned long long)hits,
              (unsigned long long)misses);
        printf("  mask cache over a %zu-token object, twice: %llu hits, %llu misses (first pass: %llu); %.3f ms a mask "
               "through it against %.3f ms walking\n", nid, (unsigned long long)hits, (unsigned long long)misses,
               (unsigned long long)(hits - (nid + 1)), 1e3 * t_cache / (2.0 * (double)(nid + 1)),
               1e3 * t_walk / (2.0 * (double)(nid + 1)));
        /* a step's masks filled at once on a pool's threads (okv_json_mask_cache_fill, what the scheduler does
         * before sampling): the states of the document's prefixes, 16 a step, each twice (two requests in one
         * state: one walk); then every lookup of the step hits, and its mask is the walk's */
        {
            okv_json_mask_cache *mf = NULL;
            okv_threadpool *pool = NULL;
            CHECK(okv_json_mask_cache_create(n, 1024, &mf) == OKV_OK && okv_threadpool_create(4, &pool) == OKV_OK,
                  "fill: %s", okv_last_error());
            struct okv_json_state *st = malloc(sizeof *st * (nid + 1));
            okv_json_init(&st[0], true);
            for (size_t i = 0; i < nid; i++) {
                st[i + 1] = st[i];
                int nb = 0;
                const uint8_t *by = okv_token_trie_bytes(trie, ids[i], &nb);
                okv_json_feed_n(&st[i + 1], by, (size_t)nb);
            }
            int fdiff = 0, n_put = 0, n_steps = 0;
            uint64_t h0, m0, h1, m1;
            okv_json_mask_cache_stats(mf, &h0, &m0);
            double t_fill = 0;
            for (size_t a0 = 0; a0 <= nid; a0 += 16) {
                const struct okv_json_state *step[32];
                int ns = 0;
                for (size_t i = a0; i <= nid && i < a0 + 16; i++) {
                    step[ns++] = &st[i];
                    step[ns++] = &st[i];
                }
                double t0 = okv_now();
                n_put += okv_json_mask_cache_fill(mf, step, ns, trie, eog, n_eog, pool);
                t_fill += okv_now() - t0;
                n_steps++;
                for (int q = 0; q < ns; q++) {
                    for (int k = 0; k < n; k++)
                        lg[k] = lc[k] = 0.0f;
                    const int a = okv_json_mask(step[q], trie, eog, n_eog, lg, n);
                    const int b = okv_json_mask_cached(mf, step[q], trie, eog, n_eog, lc, n);
                    fdiff += a != b || memcmp(lg, lc, sizeof(float) * (size_t)n) != 0;
                }
            }
            okv_json_mask_cache_stats(mf, &h1, &m1);
            CHECK(fdiff == 0, "%d masks after a fill differ from the walk's", fdiff);
            CHECK(m1 == m0 && h1 - h0 == 2 * (nid + 1), "after each fill every lookup of its step hits (%llu hits, "
                  "%llu misses)", (unsigned long long)(h1 - h0), (unsigned long long)(m1 - m0));
            CHECK(n_put > 0 && n_put <= (int)(nid + 1), "a fill walks each distinct state once (%d put for %zu states)",
                  n_put, nid + 1);
            CHECK(okv_json_mask_cache_fill(mf, (const struct okv_json_state *const *)&(const struct okv_json_state *){&st[0]},
                                           1, trie, eog, n_eog, pool) == 0, "a fill of a cached state walks nothing");
            printf("  mask cache fill, %d steps of 16 states (each twice) on %d threads: %d walks, %.3f ms a step\n",
                   n_steps, okv_threadpool_size(pool), n_put, 1e3 * t_fill / n_steps);
            free(st);
            okv_threadpool_free(pool);
            okv_json_mask_cache_free(mf);
        }
        /* two schemas, one after the other (the second may take the first's address): no mask of the first */
        for (int k = 0; k < 2; k++) {
            const char *sc = k == 0 ? "{\"enum\": [\"alpha\", \"beta\"]}" : "{\"enum\": [\"gamma\", \"delta\"]}";
            okv_json_schema *one = NULL;
            okv_json_schema_compile(sc, strlen(sc), &one);
            struct okv_json_state s;
            okv_json_init_schema(&s, one);
            okv_json_feed(&s, '"');
            for (int q = 0; q < n; q++)
                lg[q] = lc[q] = 0.0f;
            okv_json_mask(&s, trie, eog, n_eog, lg, n);
            okv_json_mask_cached(mc, &s, trie, eog, n_eog, lc, n);
            CHECK(memcmp(lg, lc, sizeof(float) * (size_t)n) == 0, "schema %d: the cache's mask is its own", k);
            okv_json_schema_free(one);
        }
        free(lc);
        okv_free(ids);
        okv_json_mask_cache_free(mc);
    }
    /* a SentencePiece vocabulary (Llama 2's layout): a token's U+2581 is a space in its bytes, at the start too (the
     * streamed text keeps it; only a whole decode drops the first one), and its byte tokens are their bytes */
    {
        char p2[1024];
        snprintf(p2, sizeof p2, "%s/tests/data/tok_llama2/tokenizer.json", tu_src_dir());
        okv_tokenizer *spm = NULL;
        okv_token_trie *tr2 = NULL;
        CHECK(okv_tokenizer_from_json_file(p2, &spm) == OKV_OK && okv_token_trie_build(spm, &tr2) == OKV_OK, "llama2-style "
              "trie: %s", okv_last_error());
        int spaced = 0, wrong = 0, bytes_ok = 0;
        for (int32_t id = 0; spm && tr2 && id < okv_tokenizer_n_vocab(spm); id++) {
            const char *str = okv_tokenizer_token_str(spm, id);
            int nb = 0;
            const uint8_t *b = okv_token_trie_bytes(tr2, id, &nb);
            if (str && strncmp(str, "\xE2\x96\x81", 3) == 0) {   /* every U+2581 a space, the first one included */
                char want[256];
                size_t w = 0;
                for (size_t i = 0; str[i] && w < sizeof want; i++) {
                    if (strncmp(str + i, "\xE2\x96\x81", 3) == 0) {
                        want[w++] = ' ';
                        i += 2;
                    } else {
                        want[w++] = str[i];
                    }
                }
                spaced++;
                wrong += !(nb == (int)w && memcmp(b, want, w) == 0);
            }
            if (str && strcmp(str, "<0x7B>") == 0)
                bytes_ok = nb == 1 && b[0] == '{';
        }
        CHECK(spaced > 10 && wrong == 0, "%d of %d tokens starting with U+2581 lack their space in the trie", wrong, spaced);
        CHECK(bytes_ok, "the byte token <0x7B> is the byte '{'");
        okv_token_trie_free(tr2);
        okv_tokenizer_free(spm);
    }
    okv_json_schema_free(sch);
    free(lg);
    okv_token_trie_free(trie);
    okv_tokenizer_free(tok);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_structured");
}
