#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void set_message(vtr_error *err, const char *fmt, va_list ap)
{
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
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
    size_t used = strlen(err->msg);
    snprintf(err->msg + used, sizeof err->msg - used, ": %s", strerror(saved));
    return VTR_ERR_IO;
}

void vtr_error_context(vtr_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[VTR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* shift the message right to make room for "prefix: ", dropping what overflows */
    size_t plen = strlen(prefix) + 2;
    if (plen >= sizeof err->msg)
        plen = sizeof err->msg - 1;
    size_t mlen = strlen(err->msg);
    if (plen + mlen >= sizeof err->msg)
        mlen = sizeof err->msg - 1 - plen;
    memmove(err->msg + plen, err->msg, mlen);
    err->msg[plen + mlen] = '\0';
    memcpy(err->msg, prefix, plen - 2);
    memcpy(err->msg + plen - 2, ": ", plen >= 2 ? 2 : 0);
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
    static const char hex[] = "0123456789abcdef";
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
    size_t i = 0;
    while (i < n) {
        unsigned c = (unsigned char)s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | ((unsigned char)s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
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
