/* vtr-serve's search page: index/web_page.html, built into the program (web_page.c) so
 * that a server needs no file beside it. */
#ifndef VTR_WEB_PAGE_H
#define VTR_WEB_PAGE_H

#include <stddef.h>

extern const char vtr_web_page[]; /* the HTML, NUL-terminated */

size_t vtr_web_page_size(void); /* its bytes, the NUL not counted */

#endif
