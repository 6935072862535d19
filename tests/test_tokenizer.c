/* Caption tokenizer: a table of captions with their NLTK word_tokenize(caption.lower())
 * tokens, written by hand from NLTK's rules (nltk/tokenize/destructive.py and Punkt; NLTK
 * itself is not installed here), plus the pre-tokenized (HGR) mode and bad input. */
#include <stdlib.h>

#include "check.h"
#include "text/tokenizer.h"

typedef struct tokenized {
    const char *caption;
    const char *tokens; /* joined by single spaces */
} tokenized;

/* MSR-VTT / COCO style captions. */
static const tokenized word_table[] = {
    {"A man is playing a guitar.", "a man is playing a guitar ."},
    {"a kid plays with a toy car on the floor", "a kid plays with a toy car on the floor"},
    {"A man plays guitar in front of a crowd of people at a concert.",
     "a man plays guitar in front of a crowd of people at a concert ."},
    /* contractions */
    {"A woman doesn't like the cat.", "a woman does n't like the cat ."},
    {"It's a sunny day, and they're walking on the beach.",
     "it 's a sunny day , and they 're walking on the beach ."},
    {"Someone can't open the door!", "someone ca n't open the door !"},
    {"I'm cooking pasta in the kitchen.", "i 'm cooking pasta in the kitchen ."},
    {"We've been here; he'll come later, I'd say.",
     "we 've been here ; he 'll come later , i 'd say ."},
    {"A man's hat won't fit.", "a man 's hat wo n't fit ."},
    {"The girl's mother wasn't happy.", "the girl 's mother was n't happy ."},
    {"The children's toys are on the floor.", "the children 's toys are on the floor ."},
    {"The dogs' owner walks them.", "the dogs ' owner walks them ."},
    {"A man cannot stop laughing.", "a man can not stop laughing ."},
    {"They're gonna win, wanna bet?", "they 're gon na win , wan na bet ?"},
    {"D'ye see it? Gimme that, lemme go. I gotta go.",
     "d 'ye see it ? gim me that , lem me go . i got ta go ."},
    /* quotes */
    {"A \"funny\" video of cats.", "a `` funny '' video of cats ."},
    {"\"Hello,\" she said.", "`` hello , '' she said ."},
    {"A woman says \"I love it.\"", "a woman says `` i love it . ''"},
    {"He said \"stop.\" Then he left.", "he said `` stop . '' then he left ."},
    {"\xE2\x80\x9CSmart\xE2\x80\x9D quotes here.",
     "\xE2\x80\x9C smart \xE2\x80\x9D quotes here ."},
    /* brackets and punctuation */
    {"A man (in a red shirt) talks about cars.", "a man ( in a red shirt ) talks about cars ."},
    {"A car drives fast (very fast).", "a car drives fast ( very fast ) ."},
    {"A dog (a big one.) runs away.", "a dog ( a big one . ) runs away ."},
    {"A cartoon character [Mickey] dances.", "a cartoon character [ mickey ] dances ."},
    {"a list: apples, pears", "a list : apples , pears"},
    {"Cooking show: a chef makes soup.", "cooking show : a chef makes soup ."},
    {"A man uses a #hashtag & @mention.", "a man uses a # hashtag & @ mention ."},
    {"50% off sale", "50 % off sale"},
    {"A man -- an actor -- speaks.", "a man -- an actor -- speaks ."},
    {"Where is it?!", "where is it ? !"},
    {"A girl is singing... and dancing", "a girl is singing ... and dancing"},
    {"A cat... a dog... a bird.", "a cat ... a dog ... a bird ."},
    /* numbers and hyphens stay whole */
    {"The price is $1,000 or 3.5 percent.", "the price is $ 1,000 or 3.5 percent ."},
    {"There are 2,500 people; some of them are singing.",
     "there are 2,500 people ; some of them are singing ."},
    {"People are dancing at 10:30 in the morning.",
     "people are dancing at 10:30 in the morning ."},
    {"Is it 3.5 or 4?", "is it 3.5 or 4 ?"},
    {"Someone is cutting an onion into 1/2 inch pieces.",
     "someone is cutting an onion into 1/2 inch pieces ."},
    {"A well-known chef cooks.", "a well-known chef cooks ."},
    /* sentences: only a sentence's final period is split off */
    {"Two dogs play. A cat watches.", "two dogs play . a cat watches ."},
    {"a man talks. a woman listens", "a man talks . a woman listens"},
    {"What is this? A dog.", "what is this ? a dog ."},
    {"Mr. Smith talks to Dr. Jones.", "mr. smith talks to dr. jones ."},
    {"The U.S. team wins the game.", "the u.s. team wins the game ."},
    {"It is 5 p.m. now.", "it is 5 p.m. now ."},
    {"John F. Kennedy speaks.", "john f. kennedy speaks ."},
    {"Scene 3. the end.", "scene 3. the end ."},
    {"Hello.World", "hello.world"},
    /* white space */
    {"  leading and trailing spaces  ", "leading and trailing spaces"},
    {"A man,\tsitting\non a bench.", "a man , sitting on a bench ."},
    {"", ""},
    {" \t\n ", ""},
    /* non-ASCII letters stay in words; Latin, Greek and Cyrillic are lowercased */
    {"Jos\xC3\xA9 plays the piano in S\xC3\xA3o Paulo.",
     "jos\xC3\xA9 plays the piano in s\xC3\xA3o paulo ."},
    {"\xC3\x89" "COLE DE MUSIQUE", "\xC3\xA9" "cole de musique"},
    /* ΟΔΟΣ -> οδος with a final sigma; МОСКВА -> москва */
    {"\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xD0\x9C\xD0\x9E\xD0\xA1\xD0\x9A\xD0\x92\xD0\x90",
     "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 \xD0\xBC\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0"},
    /* İ lowercases to i + U+0307, as in Python */
    {"\xC4\xB0stanbul", "i\xCC\x87stanbul"},
    /* CJK and emoji pass through */
    {"A cat \xE7\x8C\xAB \xF0\x9F\x98\xBA sleeps.", "a cat \xE7\x8C\xAB \xF0\x9F\x98\xBA sleeps ."},
};

/* Rules of NLTK 3.9 that older NLTK versions (3.5 .. 3.8) applied differently: a quote
 * before a word is split off ("'hello" -> "' hello"). vtr follows 3.9. */
static const tokenized edge_table[] = {
    {"A man says 'hello' to the camera.", "a man says ' hello ' to the camera ."},
    {"The 'Tis season", "the ' tis season"},
    {"Rock 'n roll", "rock 'n roll"},
};

static void join_tokens(const vtr_tokens *t, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < t->n; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? " " : "", t->tokens[i]);
    CHECK(n < size);
}

static void check_table(const tokenized *table, size_t n, vtr_tokenizer_mode mode)
{
    vtr_error err;
    vtr_tokens t = {0};
    char got[1024];
    for (size_t i = 0; i < n; i++) {
        CHECK_OK(vtr_tokenize(table[i].caption, mode, &t, &err));
        join_tokens(&t, got, sizeof got);
        if (strcmp(got, table[i].tokens) != 0) {
            vtr_tokens_free(&t);
            test_fail(__FILE__, __LINE__, "\"%s\" -> \"%s\", expected \"%s\"", table[i].caption,
                      got, table[i].tokens);
        }
    }
    vtr_tokens_free(&t);
}

TEST(tokenizer_nltk_table)
{
    check_table(word_table, sizeof word_table / sizeof word_table[0], VTR_TOKENIZE_WORDS);
}

TEST(tokenizer_nltk_39_edges)
{
    check_table(edge_table, sizeof edge_table / sizeof edge_table[0], VTR_TOKENIZE_WORDS);
}

TEST(tokenizer_whitespace_mode)
{
    static const tokenized table[] = {
        {"a man is playing a guitar", "a man is playing a guitar"},
        {"  A  Man\tis\nhere  ", "A Man is here"},     /* no lowercasing */
        {"do n't stop .", "do n't stop ."},             /* tokens kept as they are */
        {"caf\xC3\xA9\xC2\xA0" "bar", "caf\xC3\xA9 bar"}, /* U+00A0 is white space */
        {"", ""},
    };
    check_table(table, sizeof table / sizeof table[0], VTR_TOKENIZE_WHITESPACE);
}

/* Characters whose UTF-8 holds the byte 0x85 or 0xA0 (the Latin-1 white space NEL and
 * NBSP as code points): \u00e0, \u0445, \u2819. The rules' byte-wise loops once read
 * such a byte as white space, cutting "voil\u00e0" into "voil\xc3" and a stray byte
 * (found by fuzz_tokenizer). */
TEST(tokenizer_keeps_characters_whole)
{
    static const tokenized table[] = {
        {"Voil\xC3\xA0, \xD0\xA5\xD0\xBE\xD1\x80\xD0\xBE\xD1\x88\xD0\xBE "
         "\xD1\x85\xD0\xBB\xD0\xB5\xD0\xB1.",
         "voil\xC3\xA0 , \xD1\x85\xD0\xBE\xD1\x80\xD0\xBE\xD1\x88\xD0\xBE "
         "\xD1\x85\xD0\xBB\xD0\xB5\xD0\xB1 ."},
        {"(wo\xE2\xA0\x99" "can", "( wo\xE2\xA0\x99" "can"},
        {"a\xC2\xA0" "b", "a b"}, /* U+00A0 itself is white space */
    };
    check_table(table, sizeof table / sizeof table[0], VTR_TOKENIZE_WORDS);
}

TEST(tokenizer_buffers_are_reused)
{
    vtr_error err;
    vtr_tokens t = {0};
    char long_caption[4000];
    size_t n = 0;
    for (int i = 0; i < 400; i++)
        n += (size_t)snprintf(long_caption + n, sizeof long_caption - n, "w%d, ", i);
    CHECK_OK(vtr_tokenize(long_caption, VTR_TOKENIZE_WORDS, &t, &err));
    CHECK_EQ_INT(t.n, 800);
    CHECK_STR(t.tokens[0], "w0");
    CHECK_STR(t.tokens[799], ",");
    CHECK_OK(vtr_tokenize("short one.", VTR_TOKENIZE_WORDS, &t, &err));
    CHECK_EQ_INT(t.n, 3);
    CHECK_STR(t.tokens[2], ".");
    vtr_tokens_free(&t);
    vtr_tokens_free(&t); /* safe twice */
}

TEST(tokenizer_rejects_invalid_utf8)
{
    vtr_error err;
    vtr_tokens t = {0};
    CHECK_FAILS(vtr_tokenize("a caf\xC3 bar", VTR_TOKENIZE_WORDS, &t, &err), VTR_ERR_FORMAT,
                "invalid UTF-8 at byte 5");
    CHECK_EQ_INT(t.n, 0);
    CHECK_FAILS(vtr_tokenize("overlong \xC0\xAF", VTR_TOKENIZE_WHITESPACE, &t, &err),
                VTR_ERR_FORMAT, "invalid UTF-8 at byte 9");
    CHECK_FAILS(vtr_tokenize("surrogate \xED\xA0\x80", VTR_TOKENIZE_WORDS, &t, &err),
                VTR_ERR_FORMAT, "invalid UTF-8");
    CHECK_FAILS(vtr_tokenize("x", (vtr_tokenizer_mode)7, &t, &err), VTR_ERR_INVALID,
                "unknown mode");
    vtr_tokens_free(&t);
}

TEST(tokenizer_mode_names)
{
    vtr_tokenizer_mode m;
    CHECK_EQ_INT(vtr_tokenizer_mode_parse("words", &m), 0);
    CHECK_EQ_INT(m, VTR_TOKENIZE_WORDS);
    CHECK_EQ_INT(vtr_tokenizer_mode_parse("whitespace", &m), 0);
    CHECK_EQ_INT(m, VTR_TOKENIZE_WHITESPACE);
    CHECK_EQ_INT(vtr_tokenizer_mode_parse("nltk", &m), -1);
    CHECK_STR(vtr_tokenizer_mode_name(VTR_TOKENIZE_WHITESPACE), "whitespace");
}
