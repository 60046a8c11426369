// The C shim over libphonenumber. Thin by design: every decision is made in Swift
// (Sources/authd/Accounts/PhoneNumber.swift); this only translates types.
#include "CPhoneNumber.h"

#include <cstring>
#include <string>

#include <phonenumbers/phonenumber.pb.h>
#include <phonenumbers/phonenumberutil.h>

using i18n::phonenumbers::PhoneNumber;
using i18n::phonenumbers::PhoneNumberUtil;

static bool copy_out(const std::string &value, char *out, size_t size) {
    if (value.size() + 1 > size) return false;
    std::memcpy(out, value.c_str(), value.size() + 1);
    return true;
}

extern "C" authd_phone_status authd_phone_normalize(const char *input, const char *default_region,
                                                    char *e164, size_t e164_size,
                                                    char *region, size_t region_size,
                                                    authd_phone_type *type) {
    // GetInstance is a thread-safe singleton; its methods are const.
    const PhoneNumberUtil *util = PhoneNumberUtil::GetInstance();
    PhoneNumber number;
    std::string default_region_code = (default_region && *default_region) ? default_region : "ZZ";
    switch (util->Parse(input, default_region_code, &number)) {
    case PhoneNumberUtil::NO_PARSING_ERROR: break;
    case PhoneNumberUtil::INVALID_COUNTRY_CODE_ERROR: return AUTHD_PHONE_INVALID_COUNTRY_CODE;
    case PhoneNumberUtil::TOO_SHORT_AFTER_IDD:
    case PhoneNumberUtil::TOO_SHORT_NSN: return AUTHD_PHONE_TOO_SHORT;
    case PhoneNumberUtil::TOO_LONG_NSN: return AUTHD_PHONE_TOO_LONG;
    default: return AUTHD_PHONE_NOT_A_NUMBER;
    }
    switch (util->IsPossibleNumberWithReason(number)) {
    case PhoneNumberUtil::IS_POSSIBLE: break;
    case PhoneNumberUtil::INVALID_COUNTRY_CODE: return AUTHD_PHONE_INVALID_COUNTRY_CODE;
    case PhoneNumberUtil::TOO_SHORT: return AUTHD_PHONE_TOO_SHORT;
    case PhoneNumberUtil::TOO_LONG: return AUTHD_PHONE_TOO_LONG;
    default: return AUTHD_PHONE_INVALID;  // IS_POSSIBLE_LOCAL_ONLY, INVALID_LENGTH
    }
    if (!util->IsValidNumber(number)) return AUTHD_PHONE_INVALID;

    std::string formatted;
    util->Format(number, PhoneNumberUtil::E164, &formatted);
    std::string region_code;
    util->GetRegionCodeForNumber(number, &region_code);
    if (!copy_out(formatted, e164, e164_size) || !copy_out(region_code, region, region_size)) return AUTHD_PHONE_BAD_ARGUMENT;
    switch (util->GetNumberType(number)) {
    case PhoneNumberUtil::MOBILE: *type = AUTHD_PHONE_TYPE_MOBILE; break;
    case PhoneNumberUtil::FIXED_LINE_OR_MOBILE: *type = AUTHD_PHONE_TYPE_FIXED_LINE_OR_MOBILE; break;
    case PhoneNumberUtil::FIXED_LINE: *type = AUTHD_PHONE_TYPE_FIXED_LINE; break;
    default: *type = AUTHD_PHONE_TYPE_OTHER; break;
    }
    return AUTHD_PHONE_OK;
}
