/* The search page's bytes (web_page.h): the assembler includes index/web_page.html
 * (Makefile.in names it as a dependency of this file's object). */
#include "web_page.h"

__asm__(".section .rodata\n"
        ".global vtr_web_page\n"
        ".type vtr_web_page, @object\n"
        "vtr_web_page:\n"
        ".incbin \"index/web_page.html\"\n"
        ".byte 0\n"
        ".global vtr_web_page_end\n"
        "vtr_web_page_end:\n"
        ".previous\n");

extern const char vtr_web_page_end[];

size_t vtr_web_page_size(void)
{
    return (size_t)(vtr_web_page_end - vtr_web_page) - 1;
}
