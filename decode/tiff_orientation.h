/* The Orientation tag of a TIFF file, which FFmpeg 5.1's TIFF decoder does not read: a
 * camera's TIFF, or one a viewer turned by rewriting the tag only. */
#ifndef VTR_TIFF_ORIENTATION_H
#define VTR_TIFF_ORIENTATION_H

/* The Orientation (1..8, EXIF's values) of the first image directory of the TIFF file
 * at path; 0 when it has none or the file cannot be read as TIFF. */
int vtr_tiff_orientation(const char *path);

#endif
