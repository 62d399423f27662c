export { canonicalCidr } from '@sonar/shared';
