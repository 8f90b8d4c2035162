package eni

import "errors"

// Every error the Manager returns wraps one of the kinds of EC2 failure of ec2client (ErrTransient,
// ErrBooksWrong, ErrSubnetFull, ErrNoPrefix, ErrUnauthorized, ErrRejected; see ec2client.Classify), or
// ErrNoDeviceIndex, the Manager's own refusal, or is a plain I/O error of the journal.

// ErrNoDeviceIndex: the instance has no free device index for a new ENI (ENIs the books do not count hold the
// slots). The unused ENI is deleted; creating another will not help until a slot frees.
var ErrNoDeviceIndex = errors.New("no free device index")
