/* NVStream's error codes (nvs/errorCode.h), for its C++ Store API over libnvs: the same
 * names and values, so NVStream's readers and writers compile unchanged. See store.h. */
#ifndef NVS_COMPAT_ERRORCODE_H
#define NVS_COMPAT_ERRORCODE_H

namespace nvs {
enum ErrorCode {
  NO_ERROR = 0,
  DUPLICATE_KEY,
  ELEM_NOT_FOUND,
  STORE_NOT_FOUND,
  KEY_NOT_EXIST,
  HEAP_NOT_EXIST,
  ID_IN_USE,
  LOG_EXIST,
  OPEN_FAILED,
  PMEM_ERROR,
  ID_NOT_FOUND,
  ID_FOUND,
  NOT_ENOUGH_SPACE
};
}

#endif
