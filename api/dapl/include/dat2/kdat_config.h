/**
 * @file kdat_config.h
 * @brief kDAPL version and build configuration, as the DAT collaboration's kdat_config.h names them.
 */
#ifndef _KDAT_CONFIG_H_
#define _KDAT_CONFIG_H_

/** @brief The kDAT API version this header describes. */
#define DAT_VERSION_MAJOR 2
/** @brief The kDAT API version this header describes. */
#define DAT_VERSION_MINOR 0

/** @brief kDAPL calls may be made from several threads at once (krdmad's kDAPL serialises per IA). */
#ifndef DAT_THREADSAFE
#define DAT_THREADSAFE DAT_TRUE
#endif

/** @brief The extension layout of the distribution's DAT headers (always on there). */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* _KDAT_CONFIG_H_ */
