/* test_error.c - unit tests of the error record helpers (src/util/error.c): a prefix
 * goes in front of the message, the status is kept, and a message at the record's
 * capacity is cut at its end, never overrun. */
#include "unit.h"
#include "util/error.h"

#include <string.h>

NR_TEST(error_prefix_goes_in_front_and_keeps_the_status) {
  nr_error err = {0};
  nr_errorf(&err, NR_ERR_SHAPE, "tensor 'x' has rank 3");
  CHECK(nr_error_prefix(&err, "node %s: ", "/conv1/Conv") == NR_ERR_SHAPE);
  CHECK(!strcmp(err.message, "node /conv1/Conv: tensor 'x' has rank 3"), "%s", err.message);
}

NR_TEST(error_prefix_cuts_a_full_message_at_its_end) {
  nr_error err = {0};
  char long_msg[2000];
  memset(long_msg, 'm', sizeof long_msg - 1);
  long_msg[sizeof long_msg - 1] = '\0';
  nr_errorf(&err, NR_ERR_INVALID_MODEL, "%s", long_msg);
  size_t cap = sizeof err.message - 1;
  CHECK(strlen(err.message) == cap, "%zu", strlen(err.message));
  CHECK(nr_error_prefix(&err, "engine: ") == NR_ERR_INVALID_MODEL);
  REQUIRE(strlen(err.message) == cap, "%zu", strlen(err.message));
  CHECK(!strncmp(err.message, "engine: mmm", 11));
  CHECK(err.message[cap - 1] == 'm');
}

NR_TEST(error_prefix_without_a_record_is_an_internal_error) {
  CHECK(nr_error_prefix(NULL, "x") == NR_ERR_INTERNAL);
}
