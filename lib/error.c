#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

size_t vtr_utf8_len(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

/* Copies text into msg as one line (error.h): control characters and bytes outside
 * UTF-8 as \xNN; a text too long is cut before the first character that does not fit. */
static void put_line(char msg[VTR_ERROR_MSG_MAX], const char *text)
{
    size_t used = 0, n = strlen(text);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)text[i];
        size_t len = vtr_utf8_len(text + i, n - i);
        bool escape = len == 0 || c < 0x20 || c == 0x7f;
        size_t need = escape ? 4 : len;
        if (used + need >= VTR_ERROR_MSG_MAX)
            break;
        if (escape) {
            msg[used] = '\\';
            msg[used + 1] = 'x';
            msg[used + 2] = hex[c >> 4];
            msg[used + 3] = hex[c & 15];
            i++;
        } else {
            memcpy(msg + used, text + i, len);
            i += len;
        }
        used += need;
    }
    msg[used] = '\0';
}

static void set_message(vtr_error *err, const char *fmt, va_list ap)
{
    char text[VTR_ERROR_MSG_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    put_line(err->msg, text);
}

vtr_status vtr_fail(vtr_error *err, vtr_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    set_message(err, fmt, ap);
    va_end(ap);
    return status;
}

vtr_status vtr_fail_errno(vtr_error *err, const char *fmt, ...)
{
    int saved = errno;
    if (!err)
        return VTR_ERR_IO;
    err->status = VTR_ERR_IO;
    va_list ap;
    va_start(ap, fmt);
    set_message(err, fmt, ap);
    va_end(ap);
    char text[2 * VTR_ERROR_MSG_MAX];
    snprintf(text, sizeof text, "%s: %s", err->msg, strerror(saved));
    put_line(err->msg, text);
    return VTR_ERR_IO;
}

void vtr_error_context(vtr_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[VTR_ERROR_MSG_MAX], text[2 * VTR_ERROR_MSG_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* "prefix: message", cut to the buffer at a character */
    snprintf(text, sizeof text, "%s: %s", prefix, err->msg);
    put_line(err->msg, text);
}

void vtr_error_clear(vtr_error *err)
{
    if (!err)
        return;
    err->status = VTR_OK;
    err->msg[0] = '\0';
}

const char *vtr_status_name(vtr_status status)
{
    switch (status) {
    case VTR_OK: return "ok";
    case VTR_ERR_IO: return "io";
    case VTR_ERR_FORMAT: return "format";
    case VTR_ERR_UNSUPPORTED: return "unsupported";
    case VTR_ERR_INVALID: return "invalid";
    case VTR_ERR_NOMEM: return "nomem";
    case VTR_ERR_NOT_FOUND: return "not_found";
    case VTR_ERR_DB: return "db";
    case VTR_ERR_CODEC: return "codec";
    case VTR_ERR_DEVICE: return "device";
    }
    return "unknown";
}

const char *vtr_printable(const char *s, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t need = (c >= 0x20 && c < 0x7f && c != '\\') ? 1 : 4;
        if (used + need + 4 > size) {
            memcpy(buf + used, "...", 3);
            used += 3;
            break;
        }
        if (need == 1) {
            buf[used++] = (char)c;
        } else {
            buf[used++] = '\\';
            buf[used++] = 'x';
            buf[used++] = hex[c >> 4];
            buf[used++] = hex[c & 15];
        }
    }
    buf[used] = '\0';
    return buf;
}

bool vtr_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = vtr_utf8_len(s + i, n - i)))
            return false;
    return true;
}

const char *vtr_shown(const char *s, char *buf, size_t size)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return vtr_printable(s, n, buf, size);
    return vtr_utf8_valid(s, n) ? s : vtr_printable(s, n, buf, size);
}
