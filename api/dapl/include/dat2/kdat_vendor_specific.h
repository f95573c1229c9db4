/**
 * @file kdat_vendor_specific.h
 * @brief Vendor additions to the kDAT API: OpenRDMA adds none (the DAT collaboration's file is empty too, beyond
 *        its guard).
 */
#ifndef _KDAT_VENDOR_SPECIFIC_H_
#define _KDAT_VENDOR_SPECIFIC_H_
#endif /* _KDAT_VENDOR_SPECIFIC_H_ */
