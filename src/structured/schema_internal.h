/* Structured output: the compiled JSON schema (src/structured/schema.c) as the recognizer
 * (src/structured/json.c) reads it. */
#ifndef OKV_STRUCTURED_SCHEMA_INTERNAL_H
#define OKV_STRUCTURED_SCHEMA_INTERNAL_H

#include "oasiskv/structured.h"
#include "structured/grammar.h"
#include "structured/regex.h"

#define OKV_SCHEMA_MAX_NODES 4096

/* the JSON types, as a value's first byte tells them */
enum { T_OBJECT, T_ARRAY, T_STRING, T_NUMBER, T_BOOLEAN, T_NULL, T_COUNT };
/* N_OBJUNION: objects of several alternatives told apart by a discriminator, a property every alternative
 * requires (written first) whose string values (enum / const) differ between them: the node has that one
 * property, of a string node listing all the values, each value's slit naming its alternative, which the
 * object follows once the value is read */
enum { N_ANY, N_OBJECT, N_ARRAY, N_STRING, N_NUMBER, N_INTEGER, N_BOOLEAN, N_NULL, N_UNION, N_OBJUNION };

struct snode {
    uint8_t kind;
    bool open;                     /* object without "properties": any names and values */
    int32_t first_prop, n_props;   /* object: props[first_prop ..], in generation order */
    int32_t items;                 /* array: the items' node, -1 any */
    int32_t min_items, max_items;
    int32_t first_lit, n_lit;      /* string: lits[first_lit ..] it must be one of; n_lit 0: any string */
    int32_t alt[T_COUNT];          /* union: the node for a value of each type, -1 none */
    int32_t rx;                    /* string: the regex its content fully matches (pattern, minLength, maxLength;
                                      an index into rxs), -1 none */
};

struct sprop {
    int32_t name_off, name_len;    /* the name's minimal JSON escape, in lit */
    int32_t node;
    bool required;
};

struct slit {
    int32_t off, len;              /* the string's minimal JSON escape, in lit */
    int32_t alt;                   /* a discriminator's value: the alternative it selects (else -1) */
};

struct okv_json_schema {
    struct snode *nodes;
    int n_nodes;
    size_t cap_nodes;
    struct sprop *props;
    int n_props;
    size_t cap_props;
    struct slit *lits;
    int n_lits;
    size_t cap_lits;
    char *lit;
    size_t lit_len, lit_cap;
    int root;
    bool choice;                   /* okv_json_choice_compile: the text is one of the root's strings, raw */
    struct okv_regex *regex;       /* okv_json_regex_compile: the text, raw, fully matches it */
    struct okv_grammar *grammar;   /* okv_json_grammar_compile: the text, raw, is a sentence of it (its states are
                                      numbered as reached: the one thing a compiled schema changes, thread-safely) */
    struct okv_regex **rxs;        /* string nodes' content regexes (snode.rx) */
    int n_rxs;
    size_t cap_rxs;
    uint64_t id;                   /* unique for the process: the mask cache's key (an address can be reused) */
};

uint64_t okv_json_schema_next_id(void);

static inline int node_type(uint8_t kind)
{
    switch (kind) {
    case N_OBJECT: case N_OBJUNION: return T_OBJECT;
    case N_ARRAY: return T_ARRAY;
    case N_STRING: return T_STRING;
    case N_NUMBER: case N_INTEGER: return T_NUMBER;
    case N_BOOLEAN: return T_BOOLEAN;
    case N_NULL: return T_NULL;
    default: return -1;
    }
}

#endif
